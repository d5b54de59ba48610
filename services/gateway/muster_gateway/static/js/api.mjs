// The public API only: REST with the bearer header, and the WebSocket of docs/protocol.md.
// The token lives in sessionStorage (this tab, until it closes); it is never put in a URL:
// the socket gets it as a subprotocol (`bearer.<base64url>`), which the gateway accepts.
const KEY = 'muster.token';

export const auth = {
  token: () => sessionStorage.getItem(KEY),
  set: (token) => sessionStorage.setItem(KEY, token),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function signedOut() {
  auth.clear();
  window.dispatchEvent(new Event('muster:signed-out'));
}

export async function rest(method, path, body) {
  const headers = { Authorization: `Bearer ${auth.token() || ''}`, Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 204) return null;
  const json = await res.json().catch(() => ({}));
  if (!res.ok) {
    const err = json.error || {};
    if (res.status === 401) signedOut();
    throw new ApiError(res.status, err.code || 'internal', err.message || res.statusText);
  }
  return json;
}

export const get = (path) => rest('GET', path);
export const enc = encodeURIComponent;

function base64url(text) {
  const bytes = new TextEncoder().encode(text);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

// One socket for the page. Subscriptions survive reconnects: each remembers the last
// position it was handed and resubscribes with `afterPosition`, so nothing is missed and,
// with the position check below, nothing is shown twice.
class Socket {
  constructor() {
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();
    this.subs = new Map(); // sessionId → {handlers: Set, position: number|null, acked: bool}
    this.outbox = [];
    this.state = 'closed';
    this.stateListeners = new Set();
    this.retryMs = 250;
    this.timer = null;
  }

  onState(fn) { this.stateListeners.add(fn); return () => this.stateListeners.delete(fn); }

  setState(state) { this.state = state; for (const fn of this.stateListeners) fn(state); }

  connect() {
    if (this.ws || !auth.token()) return;
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/ws`;
    const ws = new WebSocket(url, ['muster', `bearer.${base64url(auth.token())}`]);
    this.ws = ws;
    this.setState('connecting');
    ws.onopen = () => {
      this.retryMs = 250;
      this.setState('open');
      for (const [sessionId, sub] of this.subs) this.sendSubscribe(sessionId, sub);
      const queued = this.outbox.splice(0);
      for (const frame of queued) ws.send(JSON.stringify(frame));
    };
    ws.onmessage = (ev) => this.frame(JSON.parse(ev.data));
    ws.onclose = (ev) => {
      this.ws = null;
      for (const sub of this.subs.values()) sub.acked = false;
      for (const { reject } of this.pending.values()) reject(new ApiError(0, 'disconnected', 'connection lost'));
      this.pending.clear();
      if (ev.code === 4401) { this.setState('closed'); signedOut(); return; }
      this.setState('reconnecting');
      if (auth.token()) this.timer = setTimeout(() => this.connect(), this.retryMs);
      this.retryMs = Math.min(this.retryMs * 2, 5000);
    };
  }

  close() {
    clearTimeout(this.timer);
    this.subs.clear();
    if (this.ws) { this.ws.onclose = null; this.ws.close(1000); this.ws = null; }
    this.setState('closed');
  }

  // For the tests and the benchmark: drop the connection as a network failure would.
  dropForTest() { if (this.ws) this.ws.close(4000, 'dropped'); }

  send(frame) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(frame));
    else { this.outbox.push(frame); this.connect(); }
  }

  request(type, sessionId, data) {
    const id = `c${this.nextId++}`;
    const frame = { type, id };
    if (sessionId) frame.sessionId = sessionId;
    if (data !== undefined) frame.data = data;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.send(frame);
    }).then((ack) => {
      // The gateway subscribes the creating socket from the new session's first event;
      // take those events from here on, so a later resubscribe continues from them.
      if ((type === 'create_session' || type === 'create_side_session') && ack.sessionId && !this.subs.has(ack.sessionId)) {
        this.subs.set(ack.sessionId, { handlers: new Set(), position: 0, acked: true });
      }
      return ack;
    });
  }

  sendSubscribe(sessionId, sub) {
    const data = sub.position == null ? undefined : { afterPosition: sub.position };
    this.request('subscribe', sessionId, data).then((ack) => {
      sub.acked = true;
      if (sub.position == null && ack && typeof ack.position === 'number') sub.position = ack.position;
      for (const fn of sub.handlers) fn({ type: 'subscribed', sessionId, data: ack });
    }, (err) => {
      for (const fn of sub.handlers) fn({ type: 'subscribe_failed', sessionId, data: err });
    });
  }

  subscribe(sessionId, handler) {
    let sub = this.subs.get(sessionId);
    if (!sub) {
      sub = { handlers: new Set(), position: null, acked: false };
      this.subs.set(sessionId, sub);
      sub.handlers.add(handler);
      if (this.ws && this.ws.readyState === WebSocket.OPEN) this.sendSubscribe(sessionId, sub);
      else this.connect();
    } else {
      sub.handlers.add(handler);
      // Already subscribed (e.g. by creating the session): tell the newcomer at once.
      if (sub.acked) queueMicrotask(() => handler({ type: 'subscribed', sessionId, data: {} }));
    }
    return () => {
      sub.handlers.delete(handler);
      if (sub.handlers.size === 0 && this.subs.get(sessionId) === sub) {
        this.subs.delete(sessionId);
        if (this.ws && this.ws.readyState === WebSocket.OPEN) this.request('unsubscribe', sessionId).catch(() => {});
      }
    };
  }

  frame(frame) {
    if ((frame.type === 'ack' || frame.type === 'error' || frame.type === 'pong') && frame.id != null && this.pending.has(frame.id)) {
      const { resolve, reject } = this.pending.get(frame.id);
      this.pending.delete(frame.id);
      if (frame.type === 'error') reject(new ApiError(0, frame.data.code, frame.data.message));
      else resolve(frame.data || {});
      return;
    }
    const sub = frame.sessionId ? this.subs.get(frame.sessionId) : null;
    if (!sub) return;
    if (typeof frame.position === 'number') {
      if (sub.position != null && frame.position <= sub.position) return; // already shown
      sub.position = frame.position;
    }
    for (const fn of sub.handlers) fn(frame);
  }
}

export const socket = new Socket();
window.addEventListener('muster:signed-out', () => socket.close());

// The session list: the user's main sessions with their tree signals (first from REST, then
// live from `session_tree_status` on each root's stream), search, create / rename / delete,
// and the archived side tasks.
import { html, useState, useEffect, ErrorNote, Link, Phase, navigate } from './ui.mjs';
import { get, rest, enc, socket } from './api.mjs';

// The tree signals cover the descendants; the root's own phase and `unread` join them.
function Signals({ s }) {
  return html`<span class="signals">
    ${s.treeRunning || s.phase === 'RUNNING' || s.phase === 'CANCELLING' ? html`<span class="spinner" role="img" aria-label="running"></span>` : null}
    ${s.treeUnread || s.unread ? html`<span class="dot" role="img" aria-label="unread"></span>` : null}
    ${s.pendingApprovals ? html`<span class="badge" aria-label=${s.pendingApprovals + ' pending approvals'}>${s.pendingApprovals} approval${s.pendingApprovals > 1 ? 's' : ''}</span>` : null}
    ${s.pendingQuestions ? html`<span class="badge" aria-label=${s.pendingQuestions + ' pending questions'}>${s.pendingQuestions} question${s.pendingQuestions > 1 ? 's' : ''}</span>` : null}
  </span>`;
}

function NewSession() {
  const [content, setContent] = useState('');
  const [title, setTitle] = useState('');
  const [permissionLevel, setPermission] = useState('auto');
  const [executionMode, setMode] = useState('CLOUD');
  const [error, setError] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    const data = { permissionLevel, executionMode, clientMessageId: crypto.randomUUID() };
    if (content.trim()) data.content = content.trim();
    if (title.trim()) data.title = title.trim();
    try {
      const ack = await socket.request('create_session', null, data);
      navigate(`/sessions/${ack.sessionId}`);
    } catch (err) { setError(err); }
  };
  return html`<form class="new-session" aria-label="New session" onSubmit=${submit}>
    <h2>New session</h2>
    <label>Title (optional) <input value=${title} onInput=${(e) => setTitle(e.target.value)} /></label>
    <label>First message <textarea rows="3" value=${content} onInput=${(e) => setContent(e.target.value)}></textarea></label>
    <div class="row">
      <label>Permission <select value=${permissionLevel} onChange=${(e) => setPermission(e.target.value)}>
        <option value="auto">auto</option><option value="ask">ask</option><option value="read_only">read only</option></select></label>
      <label>Execution mode <select value=${executionMode} onChange=${(e) => setMode(e.target.value)}>
        <option value="CLOUD">CLOUD</option><option value="LOCAL">LOCAL</option></select></label>
      <button class="primary" type="submit">Start</button>
    </div>
    <${ErrorNote} error=${error} />
  </form>`;
}

function Search() {
  const [q, setQ] = useState('');
  const [hits, setHits] = useState(null);
  const [error, setError] = useState(null);
  const submit = (e) => {
    e.preventDefault();
    if (!q.trim()) { setHits(null); return; }
    get(`/v1/search?q=${enc(q.trim())}`).then((b) => { setHits(b.items); setError(null); }, setError);
  };
  const target = (h) => (h.sessionId === h.rootSessionId ? `/sessions/${h.rootSessionId}` : `/sessions/${h.rootSessionId}?tab=${h.sessionId}`);
  return html`<section class="search" aria-label="Search">
    <form role="search" onSubmit=${submit}><label class="sr-only" for="search-q">Search messages</label>
      <input id="search-q" type="search" placeholder="Search all sessions" value=${q} onInput=${(e) => setQ(e.target.value)} />
      <button type="submit">Search</button></form>
    <${ErrorNote} error=${error} />
    ${hits ? html`<ul class="hits" aria-label="Search results">${hits.length === 0 ? html`<li class="muted">No match.</li>` : null}
      ${hits.map((h) => html`<li key=${h.messageId}><${Link} href=${target(h)}>${h.title || 'Untitled'}</${Link}>
        <span class="muted">${h.sessionType === 'SIDE_TASK' ? ' · side task' : ''}</span><div class="snippet">${h.snippet}</div></li>`)}</ul>` : null}
  </section>`;
}

export function SessionList() {
  const [items, setItems] = useState(null);
  const [filter, setFilter] = useState('main');
  const [error, setError] = useState(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let alive = true;
    const path = filter === 'main' ? '/v1/sessions?limit=200' : '/v1/sessions?type=SIDE_TASK&limit=1000';
    get(path).then((b) => { if (alive) setItems(filter === 'main' ? b.items : b.items.filter((s) => s.archived)); }, setError);
    return () => { alive = false; };
  }, [filter, tick]);
  // Live tree signals, phase and title of every listed root.
  useEffect(() => {
    if (!items || filter !== 'main') return undefined;
    const offs = items.map((s) => socket.subscribe(s.sessionId, (f) => {
      const ended = f.type === 'session_status' && ['COMPLETED', 'FAILED', 'CANCELLED'].includes(f.data.phase);
      const patch = f.type === 'session_tree_status' ? f.data
        : f.type === 'session_status' ? { phase: f.data.phase, ...(ended ? { unread: true } : {}) }
          : f.type === 'session_read' ? { unread: false }
            : f.type === 'session_updated' && f.data.title ? { title: f.data.title } : null;
      if (patch) setItems((list) => list.map((x) => (x.sessionId === f.sessionId ? { ...x, ...patch } : x)));
    }));
    return () => offs.forEach((off) => off());
  }, [items && items.map((s) => s.sessionId).join(), filter]);
  const act = (p) => p.then(() => setTick((t) => t + 1), setError);
  const rename = (s) => {
    const title = prompt('New title', s.title || '');
    if (title != null && title.trim()) act(rest('PATCH', `/v1/sessions/${enc(s.sessionId)}`, { title: title.trim() }));
  };
  return html`<main class="list-page">
    <div class="list-side"><${NewSession} /><${Search} /></div>
    <section class="sessions" aria-label="Sessions">
      <header class="row"><h2>${filter === 'main' ? 'Sessions' : 'Archived side tasks'}</h2>
        <label>Show <select value=${filter} onChange=${(e) => setFilter(e.target.value)} aria-label="Which sessions to show">
          <option value="main">main sessions</option><option value="archived">archived side tasks</option></select></label></header>
      <${ErrorNote} error=${error} />
      ${items && items.length === 0 ? html`<p class="muted">Nothing here yet.</p>` : null}
      <ul class="session-cards">${(items || []).map((s) => html`<li key=${s.sessionId} class="card" data-session-id=${s.sessionId}>
        <div class="card-main"><${Link} href=${filter === 'main' ? `/sessions/${s.sessionId}` : `/sessions/${s.rootSessionId}?tab=${s.sessionId}`} class="card-title">${s.title || 'Untitled'}</${Link}>
          ${filter === 'main' ? html`<${Signals} s=${s} />` : null}</div>
        <div class="card-meta"><${Phase} phase=${s.phase} /> <span class="muted">${new Date(s.updatedAt).toLocaleString()}</span></div>
        <div class="row small">
          <button class="link" onClick=${() => rename(s)} aria-label=${'Rename ' + (s.title || 'session')}>Rename</button>
          ${filter === 'archived' ? html`<button class="link" onClick=${() => act(rest('POST', `/v1/sessions/${enc(s.sessionId)}/unarchive`))}>Unarchive</button>` : null}
          <button class="link danger" onClick=${() => confirm('Delete this session?') && act(rest('DELETE', `/v1/sessions/${enc(s.sessionId)}`))} aria-label=${'Delete ' + (s.title || 'session')}>Delete</button>
        </div></li>`)}</ul>
    </section>
  </main>`;
}

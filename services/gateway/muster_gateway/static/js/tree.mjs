// A session tree: the main session's tab, one read-only tab per subagent, one tab per open
// side task (all kept mounted, so their streams stay live), and the inspector.
import { html, useState, useEffect, useRef, ErrorNote, Link, Phase } from './ui.mjs';
import { get, enc } from './api.mjs';
import { Conversation } from './conversation.mjs';
import { SideTaskForm } from './sidetask.mjs';
import { Inspector } from './inspector.mjs';

const TERMINAL = ['COMPLETED', 'FAILED', 'CANCELLED'];

export function TreeView({ sessionId, tab }) {
  const [root, setRoot] = useState(null);
  const [error, setError] = useState(null);
  const [tabs, setTabs] = useState([]);
  const [active, setActive] = useState(null);
  const [childStatus, setChildStatus] = useState({});
  const [sideVersion, setSideVersion] = useState(0);
  const [waiting, setWaiting] = useState({});
  const closed = useRef(new Set());
  const tabRefs = useRef({});

  const openTab = (entry, focus = true) => {
    setTabs((list) => (list.some((t) => t.sessionId === entry.sessionId) ? list : [...list, entry]));
    if (focus) setActive(entry.sessionId);
  };

  useEffect(() => {
    let alive = true;
    setRoot(null); setError(null); setTabs([]); closed.current = new Set();
    (async () => {
      const s = await get(`/v1/sessions/${enc(sessionId)}`);
      const r = s.rootSessionId === s.sessionId ? s : await get(`/v1/sessions/${enc(s.rootSessionId)}`);
      if (!alive) return;
      setRoot(r);
      setTabs([{ sessionId: r.sessionId, kind: 'main', label: 'Main' }]);
      setActive(r.sessionId);
      // A search hit or a link to a side task or subagent: the root first, then its tab.
      for (const id of [s.sessionId, tab].filter((x) => x && x !== r.sessionId)) {
        const t = id === s.sessionId ? s : await get(`/v1/sessions/${enc(id)}`);
        if (alive && t.rootSessionId === r.sessionId) {
          openTab({ sessionId: t.sessionId, kind: t.sessionType === 'SUBAGENT' ? 'sub' : 'side', label: t.title || (t.sessionType === 'SUBAGENT' ? t.agentType : 'Side task') });
        }
      }
    })().catch((err) => { if (alive) setError(err); });
    return () => { alive = false; };
  }, [sessionId, tab]);

  const onChildren = (parentId, executions) => {
    const status = {};
    for (const x of Object.values(executions)) {
      if (!x.childSessionId) continue;
      status[x.childSessionId] = x.status;
      if (!closed.current.has(x.childSessionId)) openTab({ sessionId: x.childSessionId, kind: 'sub', label: x.agentType || 'subagent' }, false);
    }
    setChildStatus((old) => ({ ...old, ...status }));
  };
  const onOpenChild = (childId, agentType) => { closed.current.delete(childId); openTab({ sessionId: childId, kind: 'sub', label: agentType || 'subagent' }); };
  const onFork = (source, messageId) => {
    const key = `new-${Date.now()}`;
    openTab({ sessionId: key, kind: 'new', label: 'New side task', source, forkFrom: messageId });
  };
  const newSide = () => {
    const current = tabs.find((t) => t.sessionId === active);
    const source = current && (current.kind === 'main' || current.kind === 'side') ? current.sessionId : root.sessionId;
    openTab({ sessionId: `new-${Date.now()}`, kind: 'new', label: 'New side task', source });
  };
  const close = (t) => {
    closed.current.add(t.sessionId);
    setTabs((list) => list.filter((x) => x.sessionId !== t.sessionId));
    if (active === t.sessionId) setActive(root.sessionId);
  };
  const replaceTab = (placeholder, newId) => {
    setTabs((list) => list.map((t) => (t === placeholder ? { sessionId: newId, kind: 'side', label: 'Side task' } : t)));
    setActive(newId);
    setSideVersion((v) => v + 1);
  };
  const onKey = (e, i, t) => {
    if (e.key === 'Delete' && t.kind !== 'main') { close(t); return; }
    const step = { ArrowRight: 1, ArrowLeft: -1 }[e.key];
    if (!step) return;
    const next = tabs[(i + step + tabs.length) % tabs.length];
    setActive(next.sessionId);
    tabRefs.current[next.sessionId]?.focus();
  };

  if (error) {
    return error.code === 'not_found'
      ? html`<main class="notfound" role="alert"><h1>Session not found</h1><p>It does not exist, or it is not yours.</p><${Link} href="/">Back to the sessions</${Link}></main>`
      : html`<main><${ErrorNote} error=${error} /></main>`;
  }
  if (!root) return html`<main><p class="muted">Loading…</p></main>`;
  return html`<div class="tree">
    <main class="tabs-area">
      <div class="tabbar">
        <div role="tablist" aria-label="Sessions of this tree">
          ${tabs.map((t, i) => {
            const status = t.kind === 'sub' ? childStatus[t.sessionId] : null;
            return html`<button role="tab" key=${t.sessionId} id=${'tab-' + t.sessionId} aria-selected=${active === t.sessionId} aria-controls=${'panel-' + t.sessionId}
                tabindex=${active === t.sessionId ? 0 : -1} ref=${(el) => { tabRefs.current[t.sessionId] = el; }}
                class=${'tab-' + t.kind} data-kind=${t.kind} data-session-id=${t.sessionId} data-status=${status || ''}
                aria-keyshortcuts=${t.kind !== 'main' ? 'Delete' : undefined}
                onClick=${() => setActive(t.sessionId)} onKeyDown=${(e) => onKey(e, i, t)}>
                ${t.kind === 'sub' ? '⤷ ' : ''}${t.label}${waiting[t.sessionId] ? html` <span class="badge" aria-label="waiting for you">${waiting[t.sessionId]}</span>` : ''}${status && !TERMINAL.includes(status) ? html` <span class="spinner" aria-label="running"></span>` : ''}${status === 'COMPLETED' ? html` <span class="ok" aria-label="completed">✓</span>` : ''}${status === 'FAILED' ? html` <span class="bad" aria-label="failed">✗</span>` : ''}
                ${t.kind !== 'main' ? html`<span class="tab-close" aria-hidden="true" title="Close (Delete)" onClick=${(e) => { e.stopPropagation(); close(t); }}>×</span>` : null}
              </button>`;
          })}
        </div>
        <button class="new-side" onClick=${newSide}>+ Side task</button>
      </div>
      ${tabs.map((t) => html`<section role="tabpanel" key=${t.sessionId} id=${'panel-' + t.sessionId} aria-labelledby=${'tab-' + t.sessionId}
          hidden=${active !== t.sessionId} class="panel">
        ${t.kind === 'new'
          ? html`<${SideTaskForm} source=${t.source} sourceIsMain=${t.source === root.sessionId} forkFromMessageId=${t.forkFrom}
              onCreated=${(id) => replaceTab(t, id)} onCancel=${() => close(t)} />`
          : html`<${Conversation} sessionId=${t.sessionId} kind=${t.kind} active=${active === t.sessionId} onOpenChild=${onOpenChild} onFork=${onFork}
              onTitle=${(id, title) => t.kind === 'side' && setTabs((list) => list.map((x) => (x.sessionId === id && x.label !== title ? { ...x, label: title } : x)))}
              onChildren=${onChildren} onTreeChange=${() => setSideVersion((v) => v + 1)}
              onWaiting=${(id, n) => setWaiting((w) => (w[id] === n ? w : { ...w, [id]: n }))} />`}
      </section>`)}
    </main>
    <${Inspector} rootId=${root.sessionId} version=${sideVersion} onOpen=${(id) => openTab({ sessionId: id, kind: 'side', label: 'Side task' })} />
  </div>`;
}

// The inspector: every side task of the tree, flat, with open / rename / archive / delete /
// promote, and an archived filter.
import { html, useState, useEffect, ErrorNote, Phase, navigate } from './ui.mjs';
import { get, rest, enc } from './api.mjs';
import { useSessionPhase } from './stream.mjs';

// An open side task's tab knows its phase before the listing is read again.
function LivePhase({ sessionId, phase }) {
  const live = useSessionPhase(sessionId);
  return html`<${Phase} phase=${live ?? phase} />`;
}

export function Inspector({ rootId, version, onOpen }) {
  const [items, setItems] = useState([]);
  const [archived, setArchived] = useState(false);
  const [error, setError] = useState(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let alive = true;
    const read = archived
      ? get('/v1/sessions?type=SIDE_TASK&limit=1000').then((b) => b.items.filter((s) => s.rootSessionId === rootId && s.archived))
      : get(`/v1/sessions/${enc(rootId)}/side-tasks?recursive=1`).then((b) => b.items);
    read.then((list) => { if (alive) setItems(list); }, (err) => { if (alive) setError(err); });
    return () => { alive = false; };
  }, [rootId, version, archived, tick]);
  const act = (promise) => promise.then(() => setTick(tick + 1), setError);
  const base = (id) => `/v1/sessions/${enc(id)}`;
  const rename = (s) => {
    const title = prompt('New title', s.title || '');
    if (title != null && title.trim()) act(rest('PATCH', base(s.sessionId), { title: title.trim() }));
  };
  return html`<aside class="inspector" aria-label="Side tasks of this tree">
    <h2>Side tasks</h2>
    <label class="check"><input type="checkbox" checked=${archived} onChange=${(e) => setArchived(e.target.checked)} /> Show archived</label>
    <${ErrorNote} error=${error} />
    ${items.length === 0 ? html`<p class="muted">${archived ? 'No archived side tasks.' : 'No side tasks yet.'}</p>` : null}
    <ul class="side-list">${items.map((s) => html`<li key=${s.sessionId} data-session-id=${s.sessionId}>
      <button class="link side-open" onClick=${() => onOpen(s.sessionId)}>${s.title || 'Untitled side task'}</button>
      <${LivePhase} sessionId=${s.sessionId} phase=${s.phase} />${s.unread ? html`<span class="dot" aria-label="unread"></span>` : null}
      <div class="row small">
        <button class="link" onClick=${() => rename(s)} aria-label=${'Rename ' + (s.title || 'side task')}>Rename</button>
        ${archived
          ? html`<button class="link" onClick=${() => act(rest('POST', base(s.sessionId) + '/unarchive'))}>Unarchive</button>`
          : html`<button class="link" onClick=${() => act(rest('POST', base(s.sessionId) + '/archive'))}>Archive</button>`}
        <button class="link" onClick=${() => act(rest('POST', base(s.sessionId) + '/promote').then(() => navigate('/sessions/' + s.sessionId)))}>Promote</button>
        <button class="link danger" onClick=${() => confirm('Delete this side task?') && act(rest('DELETE', base(s.sessionId)))}>Delete</button>
      </div></li>`)}</ul>
  </aside>`;
}

// A tab's header: title (renamable), phase, permission level and execution mode, the
// context preview.
import { html, useState, useEffect, Phase, ErrorNote } from './ui.mjs';
import { rest, get, enc } from './api.mjs';

function ContextDialog({ sessionId, onClose }) {
  const [ctx, setCtx] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => { get(`/v1/sessions/${enc(sessionId)}/context`).then(setCtx, setError); }, [sessionId]);
  return html`<div class="dialog" role="dialog" aria-modal="false" aria-label="Context preview">
    <header><h3>What the next model call sends</h3><button onClick=${onClose} aria-label="Close the context preview">Close</button></header>
    <${ErrorNote} error=${error} />
    ${ctx ? html`<div class="ctx"><h4>system</h4><pre>${ctx.system}</pre>
      ${ctx.messages.map((m, i) => html`<div key=${i}><h4>${m.role}${m.tool_calls ? ' (tool calls)' : ''}</h4><pre>${m.content ?? ''}${m.tool_calls ? '\n' + JSON.stringify(m.tool_calls, null, 1) : ''}</pre></div>`)}</div>` : html`<p>Loading…</p>`}
  </div>`;
}

export function SessionHeader({ sessionId, state, kind }) {
  const [showContext, setShowContext] = useState(false);
  const [error, setError] = useState(null);
  const s = state.session;
  if (!s) return html`<header class="session-header"><span class="muted">…</span></header>`;
  const patch = (body) => rest('PATCH', `/v1/sessions/${enc(sessionId)}`, body).catch(setError);
  const rename = () => {
    const title = prompt('New title', s.title || '');
    if (title != null && title.trim()) patch({ title: title.trim() });
  };
  return html`<header class="session-header">
    <h2 class="title">${s.title || 'Untitled'}</h2>
    <${Phase} phase=${state.phase} />
    ${kind !== 'sub' ? html`<button class="link" onClick=${rename} aria-label="Rename this session">Rename</button>` : null}
    <label class="setting">Permission
      <select value=${s.permissionLevel} disabled=${kind === 'sub'} onChange=${(e) => patch({ permissionLevel: e.target.value })}>
        <option value="auto">auto</option><option value="ask">ask</option><option value="read_only">read only</option>
      </select></label>
    <span class="setting" title="Execution mode (chosen when the session is created)">Mode <strong>${s.executionMode || 'CLOUD'}</strong></span>
    <button onClick=${() => setShowContext(!showContext)} aria-expanded=${showContext}>Context</button>
    <${ErrorNote} error=${error} />
    ${showContext ? html`<${ContextDialog} sessionId=${sessionId} onClose=${() => setShowContext(false)} />` : null}
  </header>`;
}

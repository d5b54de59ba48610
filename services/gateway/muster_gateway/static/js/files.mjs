// A round's file changes: the turn's own and its subagents' merged by path, each with its
// change type, line counts, merged diff and sources (issue 10's REST read).
import { html, useState, useEffect, ErrorNote } from './ui.mjs';
import { get, enc } from './api.mjs';

function Diff({ patch }) {
  if (!patch) return html`<p class="muted">No diff captured.</p>`;
  const lines = patch.split('\n');
  return html`<pre class="diff" aria-label="Diff">${lines.map((line, i) => {
    const cls = line.startsWith('+++') || line.startsWith('---') ? 'fhead' : line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : line.startsWith('@@') ? 'hunk' : '';
    return html`<span key=${i} class=${cls}>${line}\n</span>`;
  })}</pre>`;
}

function source(s) {
  return s.type === 'MAIN' ? 'MAIN' : `${s.agentType || 'subagent'} (subagent)`;
}

// `version` grows with the live file changes and finished children of the latest round, so
// an open panel follows them as they arrive.
export function RoundFiles({ sessionId, messageId, running, version }) {
  const [open, setOpen] = useState(false);
  const [items, setItems] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    if (!open) return undefined;
    let alive = true;
    get(`/v1/sessions/${enc(sessionId)}/rounds/${enc(messageId)}/file-changes`).then(
      (body) => { if (alive) { setItems(body.items); setError(null); } },
      (err) => { if (alive) setError(err); },
    );
    return () => { alive = false; };
  }, [open, running, version, sessionId, messageId]);
  const count = items ? ` · ${items.length} file${items.length === 1 ? '' : 's'}` : '';
  return html`<details class="files" onToggle=${(e) => setOpen(e.currentTarget.open)}>
    <summary>File changes${count}</summary>
    <${ErrorNote} error=${error} />
    ${items && items.length === 0 ? html`<p class="muted">No files changed in this round.</p>` : null}
    ${items ? html`<ul class="file-list" aria-label="Changed files">${items.map((f) => html`<li key=${f.path} class="file" data-path=${f.path}>
      <details>
        <summary><span class=${'change change-' + f.changeType.toLowerCase()}>${f.changeType}</span>
          <code class="path">${f.path}</code>
          <span class="add">+${f.linesAdded}</span> <span class="del">−${f.linesDeleted}</span>
          <span class="sources">from ${f.sources.map(source).join(', ')}</span></summary>
        <${Diff} patch=${f.patch} />
      </details></li>`)}</ul>` : null}
  </details>`;
}

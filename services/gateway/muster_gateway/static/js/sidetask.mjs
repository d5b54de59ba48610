// "New side task" and "fork from here": the three context modes, labelled by the source.
import { html, useState, ErrorNote } from './ui.mjs';
import { socket } from './api.mjs';

export function SideTaskForm({ source, sourceIsMain, forkFromMessageId, onCreated, onCancel }) {
  const [content, setContent] = useState('');
  const [mode, setMode] = useState(forkFromMessageId ? 'fork' : 'none');
  const [error, setError] = useState(null);
  const name = sourceIsMain ? 'main session' : 'source session';
  const submit = async (e) => {
    e.preventDefault();
    if (!content.trim()) return;
    const data = { content: content.trim(), contextMode: mode, clientMessageId: crypto.randomUUID() };
    if (mode === 'fork' && forkFromMessageId) data.forkFromMessageId = forkFromMessageId;
    try {
      const ack = await socket.request('create_side_session', source, data);
      onCreated(ack.sessionId);
    } catch (err) { setError(err); }
  };
  return html`<form class="side-form" aria-label="New side task" onSubmit=${submit}>
    <h3>${forkFromMessageId ? 'Fork to a side task' : 'New side task'}</h3>
    <fieldset><legend>Context</legend>
      ${[['none', 'None (a fresh conversation)'], ['summary', `Summary of the ${name}`], ['fork', forkFromMessageId ? `Fork of the ${name} up to this round` : `Fork of the ${name}`]].map(([value, label]) => html`
        <label key=${value}><input type="radio" name="contextMode" value=${value} checked=${mode === value} onChange=${() => setMode(value)} /> ${label}</label>`)}
    </fieldset>
    <label>First message <textarea rows="3" value=${content} onInput=${(e) => setContent(e.target.value)} required></textarea></label>
    <div class="row"><button class="primary" type="submit">Start side task</button><button type="button" onClick=${onCancel}>Cancel</button></div>
    <${ErrorNote} error=${error} />
  </form>`;
}

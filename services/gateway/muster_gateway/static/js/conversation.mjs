// A session's conversation: rounds of messages, tool calls with their results, delegation
// cards, waits answered in place, and (for main and side tabs) the composer.
import { html, useState, useEffect, useRef, useMemo, Phase, ErrorNote, parseJson, shortTime, isActive } from './ui.mjs';
import { socket, rest, enc } from './api.mjs';
import { markdownHtml } from './markdown.mjs';
import { RoundFiles } from './files.mjs';
import { Timeline } from './timeline.mjs';
import { SessionHeader } from './header.mjs';
import { useSessionStream, useSessionPhase } from './stream.mjs';

function Markdown({ text }) {
  return html`<div class="md" dangerouslySetInnerHTML=${{ __html: markdownHtml(text) }}></div>`;
}

function rounds(messages) {
  const out = [];
  for (const m of messages) {
    if (m.role === 'USER' || out.length === 0) out.push({ first: m, items: [] });
    out[out.length - 1].items.push(m);
  }
  return out;
}

// Long input (a pasted file, a #script) is folded to a few lines until asked for.
function UserMessage({ message }) {
  const [open, setOpen] = useState(false);
  const long = message.content.length > 600;
  return html`<div class="msg user" data-role="USER" data-message-id=${message.messageId}>
    <div class="who">You · ${shortTime(message.createdAt)}</div>
    <div class=${'text' + (long && !open ? ' folded' : '')}>${message.content}</div>
    ${long ? html`<button class="link" aria-expanded=${open} onClick=${() => setOpen(!open)}>${open ? 'Show less' : 'Show all'}</button>` : null}
  </div>`;
}

function Approval({ sessionId, approval }) {
  const [reason, setReason] = useState('');
  const [error, setError] = useState(null);
  const answer = (decision) => socket.request('answer_approval', sessionId, {
    approvalId: approval.approvalId, decision, ...(reason ? { reason } : {}),
  }).catch(setError);
  if (approval.status !== 'pending') return html`<p class="wait-done">Approval ${approval.status}: ${approval.tool}</p>`;
  return html`<section class="wait approval" aria-label=${'Approval request for ' + approval.tool}>
    <p><strong>Approve ${approval.tool}?</strong></p>
    <pre class="args">${JSON.stringify(approval.arguments, null, 2)}</pre>
    <label>Reason (for a denial) <input value=${reason} onInput=${(e) => setReason(e.target.value)} /></label>
    <div class="row">
      <button class="primary" onClick=${() => answer('approve')}>Approve</button>
      <button onClick=${() => answer('deny')}>Deny</button>
    </div><${ErrorNote} error=${error} /></section>`;
}

function Question({ sessionId, question }) {
  const [answer, setAnswer] = useState('');
  const [error, setError] = useState(null);
  const send = (text) => socket.request('answer_question', sessionId, { questionId: question.questionId, answer: text }).catch(setError);
  if (question.status !== 'pending') return html`<p class="wait-done">Question ${question.status}: ${question.question}</p>`;
  const onSubmit = (e) => { e.preventDefault(); if (answer.trim()) send(answer); };
  return html`<form class="wait question" aria-label="Question from the agent" onSubmit=${onSubmit}>
    <p><strong>${question.question}</strong></p>
    ${(question.options || []).length ? html`<div class="row">${question.options.map((o) => html`<button type="button" onClick=${() => send(o)}>${o}</button>`)}</div>` : null}
    <label>Your answer <input value=${answer} onInput=${(e) => setAnswer(e.target.value)} /></label>
    <button class="primary" type="submit">Answer</button><${ErrorNote} error=${error} /></form>`;
}

function DelegationCard({ call, args, result, child, execution, onOpenChild }) {
  const status = execution?.status || (result ? (result.success ? 'COMPLETED' : 'FAILED') : 'RUNNING');
  const followup = call.function.name === 'delegate_followup';
  // While the run lasts, the child's own phase says more (e.g. waiting for an approval).
  const childPhase = useSessionPhase(child?.childSessionId);
  const shown = status === 'RUNNING' && childPhase && childPhase !== 'COMPLETED' ? childPhase : status;
  return html`<article class="delegation" aria-label=${'Delegation to ' + (child?.agentType || args?.agent_type || 'subagent')} data-status=${status}>
    <header>
      <span class="agent">${followup ? 'Follow-up · ' : ''}${child?.agentType || args?.agent_type || 'subagent'}</span>
      <${Phase} phase=${shown} />
      ${child ? html`<button class="link" onClick=${() => onOpenChild(child.childSessionId, child.agentType)}>View process</button>` : null}
    </header>
    <details><summary>Task</summary><pre>${args?.task || ''}</pre></details>
    ${result ? html`<div class="result"><span class="label">Result</span><${Markdown} text=${String(result.result ?? result.error ?? '')} />
      <p class="meta">${result.rounds ?? 0} rounds · ${result.tool_calls ?? 0} tool calls${result.usage ? ` · ${result.usage.total_tokens} tokens` : ''}</p></div>` : null}
  </article>`;
}

function ToolCall({ call, toolMessage }) {
  const args = parseJson(call.function.arguments);
  const result = toolMessage ? parseJson(toolMessage.content) : null;
  const target = args && (args.path || args.command || args.question || '');
  const ok = result ? result.success !== false : null;
  return html`<details class="tool" data-tool=${call.function.name}>
    <summary><span class="tool-name">${call.function.name}</span> <span class="tool-target">${target}</span>
      ${toolMessage ? html`<span class=${ok ? 'ok' : 'bad'}>${ok ? 'done' : 'failed'}</span>` : html`<span class="spinner" aria-label="running"></span>`}</summary>
    <pre class="args">${call.function.arguments}</pre>
    ${toolMessage ? html`<pre class="tool-result">${toolMessage.content}</pre>` : null}
  </details>`;
}

function Assistant({ message, tools, state, onOpenChild }) {
  return html`<div class="msg assistant" data-role="ASSISTANT" data-message-id=${message.messageId}>
    ${message.content ? html`<${Markdown} text=${message.content} />` : null}
    ${(message.toolCalls || []).map((call) => {
      const name = call.function.name;
      if (name === 'delegate' || name === 'delegate_followup') {
        const child = state.children[call.id];
        const execution = child ? state.executions[child.executionId] : Object.values(state.executions).find((e) => e.parentToolCallId === call.id);
        const toolMessage = tools.get(call.id);
        return html`<${DelegationCard} key=${call.id} call=${call} args=${parseJson(call.function.arguments)}
          result=${toolMessage ? parseJson(toolMessage.content) : null} child=${child || (execution && { childSessionId: execution.childSessionId, agentType: execution.agentType })}
          execution=${execution} onOpenChild=${onOpenChild} />`;
      }
      return html`<${ToolCall} key=${call.id} call=${call} toolMessage=${tools.get(call.id)} />`;
    })}
  </div>`;
}

function Round({ round, sessionId, tools, state, readOnly, onOpenChild, onFork, compactionAt }) {
  const [timeline, setTimeline] = useState(false);
  const last = round.items[round.items.length - 1];
  const isLast = last === state.messages[state.messages.length - 1];
  const running = isActive(state.phase) && isLast;
  return html`<section class="round" aria-label=${'Round ' + round.first.seq}>
    ${round.items.map((m) => m.role === 'USER'
      ? html`<${UserMessage} key=${m.messageId} message=${m} />`
      : m.role === 'ASSISTANT' ? html`<${Assistant} key=${m.messageId} message=${m} tools=${tools} state=${state} onOpenChild=${onOpenChild} />` : null)}
    ${compactionAt.map((c) => html`<div class="compaction" role="note" key=${c.boundaryMessageId}>Compacted here: the model now sees a summary of the ${c.messagesCompacted} messages up to this point (${c.tokensBefore} → ${c.tokensAfter} tokens)</div>`)}
    <div class="round-tools">
      ${readOnly ? null : html`<button class="link" onClick=${() => onFork(last.messageId)} aria-label=${'Fork to side task from round ' + round.first.seq}>Fork to side task</button>`}
      <button class="link" aria-expanded=${timeline} onClick=${() => setTimeline(!timeline)}>Timeline</button>
    </div>
    <${RoundFiles} sessionId=${sessionId} messageId=${round.first.messageId} running=${running}
      version=${isLast ? state.fileChanges.length + Object.values(state.executions).filter((x) => x.status !== 'RUNNING').length : 0} />
    ${timeline ? html`<${Timeline} sessionId=${sessionId} userMessageId=${round.first.messageId} />` : null}
  </section>`;
}

function Composer({ sessionId, phase }) {
  const [text, setText] = useState('');
  const [error, setError] = useState(null);
  const send = async () => {
    const content = text.trim();
    if (!content) return;
    setError(null);
    try {
      await socket.request('send_message', sessionId, { content, clientMessageId: crypto.randomUUID() });
      setText('');
    } catch (err) { setError(err); }
  };
  const onKey = (e) => { if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); send(); } };
  return html`<form class="composer" onSubmit=${(e) => { e.preventDefault(); send(); }}>
    <label class="sr-only" for=${'composer-' + sessionId}>Message</label>
    <textarea id=${'composer-' + sessionId} rows="2" placeholder=${isActive(phase) ? 'Queued until the turn ends (Enter to send)' : 'Message (Enter to send, Shift+Enter for a new line)'}
      value=${text} onInput=${(e) => setText(e.target.value)} onKeyDown=${onKey}></textarea>
    <button class="primary" type="submit">Send</button>
    ${isActive(phase) ? html`<button type="button" onClick=${() => socket.request('cancel', sessionId).catch(setError)}>Cancel</button>` : null}
    <${ErrorNote} error=${error} />
  </form>`;
}

export function Conversation({ sessionId, kind, active, onOpenChild, onFork, onChildren, onTreeChange, onWaiting, onTitle }) {
  const [state, loadOlder] = useSessionStream(sessionId);
  const scroller = useRef(null);
  const sentinel = useRef(null);
  const stick = useRef(true);
  const readOnly = kind === 'sub';

  useEffect(() => { onChildren && onChildren(sessionId, state.executions); }, [state.executions]);
  useEffect(() => { onTreeChange && onTreeChange(); }, [state.sideVersion, state.treeStatus]);
  // Older rounds load when the top comes into view; the scroll position is kept.
  useEffect(() => {
    if (!sentinel.current) return undefined;
    let initial = true;
    const io = new IntersectionObserver((entries) => {
      const first = initial;
      initial = false;
      if (!entries.some((e) => e.isIntersecting)) return;
      // Opened at the bottom of a scrollable list: wait until the reader scrolls up.
      const el = scroller.current;
      if (first && stick.current && el && el.scrollHeight > el.clientHeight + 10) return;
      loadOlder();
    }, { root: scroller.current });
    io.observe(sentinel.current);
    return () => io.disconnect();
  }, [state.nextBeforeSeq, state.loadingOlder, state.loaded]);
  const prevHeight = useRef(0);
  useEffect(() => {
    const el = scroller.current;
    if (!el) return;
    if (stick.current) el.scrollTop = el.scrollHeight;
    else if (prevHeight.current && el.scrollTop < 50) el.scrollTop += el.scrollHeight - prevHeight.current;
    prevHeight.current = el.scrollHeight;
  });
  const onScroll = (e) => { const el = e.currentTarget; stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40; };

  const tools = useMemo(() => new Map(state.messages.filter((m) => m.role === 'TOOL').map((m) => [m.toolCallId, m])), [state.messages]);
  const grouped = useMemo(() => rounds(state.messages), [state.messages]);
  const waiting = Object.values(state.approvals).filter((a) => a.status === 'pending').length
    + Object.values(state.questions).filter((q) => q.status === 'pending').length;
  useEffect(() => { onWaiting && onWaiting(sessionId, waiting); }, [waiting]);
  const title = state.session?.title;
  useEffect(() => { if (title && onTitle) onTitle(sessionId, title); }, [title]);
  // Seen: a finished turn shown in the active tab is read (the list's unread dot follows).
  const unread = state.session?.unread && !isActive(state.phase);
  useEffect(() => {
    if (active && unread && kind !== 'sub') rest('POST', `/v1/sessions/${enc(sessionId)}/read`).catch(() => {});
  }, [active, unread, state.phase]);
  if (state.notFound) return html`<div class="notfound" role="alert"><h2>Session not found</h2><p>It does not exist, or it is not yours.</p></div>`;
  const pendingApprovals = Object.values(state.approvals).filter((a) => a.status === 'pending');
  const pendingQuestions = Object.values(state.questions).filter((q) => q.status === 'pending');
  // A compaction's marker closes the round holding its boundary message.
  const compactionsBySeq = (seq, next) => state.compactions.filter((c) => c.boundarySeq >= seq && (next == null || c.boundarySeq < next));
  return html`<div class="conversation" data-session-id=${sessionId}>
    <${SessionHeader} sessionId=${sessionId} state=${state} kind=${kind} />
    <div class="scroller" ref=${scroller} onScroll=${onScroll} tabindex="0" aria-label="Messages">
      ${state.nextBeforeSeq != null ? html`<div ref=${sentinel} class="older"><button class="link" onClick=${loadOlder}>${state.loadingOlder ? 'Loading…' : 'Load older rounds'}</button></div>` : null}
      ${!state.loaded && !state.error ? html`<p class="muted">Loading…</p>` : null}
      <${ErrorNote} error=${state.notFound ? null : state.error} />
      <div role="log" aria-live="polite" aria-label="Conversation">
      ${grouped.map((round, i) => html`<${Round} key=${round.first.messageId} round=${round} sessionId=${sessionId} tools=${tools} state=${state}
        readOnly=${readOnly} onOpenChild=${onOpenChild} onFork=${(id) => onFork(sessionId, id)}
        compactionAt=${compactionsBySeq(round.first.seq, grouped[i + 1]?.first.seq)} />`)}
      ${Object.entries(state.deltas).map(([id, text]) => html`<div class="msg assistant streaming" key=${id} data-role="ASSISTANT"><${Markdown} text=${text} /></div>`)}
      ${state.queued.map((q) => html`<div class="msg user queued" key=${q.messageId} data-role="QUEUED"><div class="who">Queued</div><div class="text">${q.content}</div></div>`)}
      ${pendingApprovals.map((a) => html`<${Approval} key=${a.approvalId} sessionId=${sessionId} approval=${a} />`)}
      ${pendingQuestions.map((q) => html`<${Question} key=${q.questionId} sessionId=${sessionId} question=${q} />`)}
      ${state.phase === 'FAILED' && state.phaseError ? html`<p class="error">Turn failed: ${state.phaseError}</p>` : null}
      </div>
    </div>
    ${readOnly ? html`<p class="muted readonly">A subagent's conversation is read-only.</p>` : html`<${Composer} sessionId=${sessionId} phase=${state.phase} />`}
  </div>`;
}

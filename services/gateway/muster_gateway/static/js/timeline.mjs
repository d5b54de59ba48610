// A turn's timeline: the session and every subagent it ran in that turn on one time axis,
// from the events' recorded times — model calls (from the event before an ASSISTANT message
// to it), tool calls (start → result), waits (request → answer) and the barrier (the last
// child's end → the results delivered into the parent).
import { html, useState, useEffect, ErrorNote } from './ui.mjs';
import { get, enc } from './api.mjs';

async function allEvents(sessionId) {
  const out = [];
  let after = 0;
  for (;;) {
    const page = await get(`/v1/sessions/${enc(sessionId)}/events?afterPosition=${after}&limit=2000`);
    out.push(...page.items);
    if (page.nextAfterPosition == null) return out;
    after = page.nextAfterPosition;
  }
}

const ms = (iso) => Date.parse(iso);

// Spans of one session's events in [from, to]: model calls, tool calls and waits.
function sessionSpans(events) {
  const spans = [];
  const started = new Map();
  const waits = new Map();
  let previous = events.length ? ms(events[0].time) : 0;
  for (const e of events) {
    const t = ms(e.time);
    const d = e.data || {};
    if (e.type === 'message' && d.role === 'ASSISTANT') {
      spans.push({ kind: 'model', label: 'model call', start: previous, end: t });
      for (const call of d.toolCalls || []) started.set(call.id, { name: call.function.name, start: t });
    }
    if (e.type === 'tool_call_started' && started.has(d.toolCallId)) started.get(d.toolCallId).start = t;
    if (e.type === 'message' && d.role === 'TOOL' && started.has(d.toolCallId)) {
      const call = started.get(d.toolCallId);
      spans.push({ kind: call.name.startsWith('delegate') ? 'delegate' : 'tool', label: call.name, start: call.start, end: t });
    }
    if (e.type === 'approval_requested' || e.type === 'question_asked') waits.set(d.approvalId || d.questionId, { start: t, label: e.type === 'approval_requested' ? `approval: ${d.tool}` : 'question' });
    if ((e.type === 'approval_resolved' || e.type === 'question_resolved') && waits.has(d.approvalId || d.questionId)) {
      const w = waits.get(d.approvalId || d.questionId);
      spans.push({ kind: 'wait', label: w.label, start: w.start, end: t });
    }
    if (e.type === 'message' || e.type === 'tool_call_started' || e.type === 'approval_resolved' || e.type === 'question_resolved') previous = t;
  }
  return spans;
}

async function buildTimeline(sessionId, userMessageId) {
  const [events, executions] = await Promise.all([allEvents(sessionId), get(`/v1/sessions/${enc(sessionId)}/executions`)]);
  const startAt = events.findIndex((e) => e.type === 'message' && e.data.messageId === userMessageId);
  if (startAt < 0) throw new Error('this round is not in the session’s events');
  let endAt = events.findIndex((e, i) => i > startAt && e.type === 'message' && e.data.role === 'USER');
  if (endAt < 0) endAt = events.length;
  const turn = events.slice(startAt, endAt);
  const byExecution = new Map(executions.items.map((x) => [x.executionId, x]));
  const runs = new Map();
  for (const e of turn) {
    if (e.type !== 'execution_status' && e.type !== 'subagent_session_created') continue;
    const x = byExecution.get(e.data.executionId);
    if (!x) continue;
    const run = runs.get(x.executionId) || { execution: x, start: ms(e.time), end: null };
    if (e.type === 'execution_status' && ['COMPLETED', 'FAILED', 'CANCELLED'].includes(e.data.status)) run.end = ms(e.time);
    runs.set(x.executionId, run);
  }
  const turnStart = ms(turn[0].time);
  const turnEnd = ms(turn[turn.length - 1].time);
  const rows = [{ id: sessionId, label: 'this session', kind: 'parent', start: turnStart, end: turnEnd, spans: sessionSpans(turn) }];
  const childEnds = [];
  for (const run of runs.values()) {
    const x = run.execution;
    // The run's own start and end (the parent's stream hears of its end only at delivery).
    const start = x.startedAt ? Math.max(ms(x.startedAt), turnStart) : run.start;
    const end = x.endedAt ? ms(x.endedAt) : run.end ?? turnEnd;
    const childEvents = (await allEvents(x.childSessionId)).filter((e) => ms(e.time) >= start - 1 && ms(e.time) <= end + 1);
    childEnds.push(end);
    rows.push({ id: x.childSessionId, label: `${x.agentType}${x.invocationType === 'FOLLOWUP' ? ' (follow-up)' : ''}`, kind: 'child', start, end, spans: sessionSpans(childEvents) });
  }
  if (childEnds.length) {
    const lastChild = Math.max(...childEnds);
    const delivered = turn.find((e) => e.type === 'message' && e.data.role === 'TOOL' && e.data.sourceSessionId && ms(e.time) >= lastChild);
    if (delivered) rows[0].spans.push({ kind: 'barrier', label: 'barrier', start: lastChild, end: ms(delivered.time) });
  }
  return { start: turnStart, end: Math.max(turnEnd, ...rows.map((r) => r.end)), rows };
}

export function Timeline({ sessionId, userMessageId }) {
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => { buildTimeline(sessionId, userMessageId).then(setData, setError); }, [sessionId, userMessageId]);
  if (error) return html`<${ErrorNote} error=${error} />`;
  if (!data) return html`<p class="muted">Loading the timeline…</p>`;
  const total = Math.max(data.end - data.start, 1);
  const pct = (t) => `${((t - data.start) / total) * 100}%`;
  const width = (a, b) => `${Math.max(((b - a) / total) * 100, 0.4)}%`;
  const Bar = ({ span, cls }) => html`<div class=${'span ' + cls} data-kind=${span.kind} data-start=${span.start} data-end=${span.end}
      style=${{ left: pct(span.start), width: width(span.start, span.end) }} title=${`${span.label}: ${span.end - span.start} ms`}
      aria-label=${`${span.label}, ${span.end - span.start} ms`} role="img"></div>`;
  return html`<figure class="timeline" aria-label="Turn timeline">
    <figcaption>Turn timeline · ${total} ms</figcaption>
    ${data.rows.map((row) => html`<div class=${'tl-row tl-' + row.kind} key=${row.id + row.start} data-session-id=${row.id}>
      <div class="tl-label">${row.label}</div>
      <div class="tl-track">
        <${Bar} span=${{ kind: row.kind === 'parent' ? 'turn' : 'run', label: row.label, start: row.start, end: row.end }} cls="whole" />
        ${row.spans.map((s, i) => html`<${Bar} key=${i} span=${s} cls=${'kind-' + s.kind} />`)}
      </div></div>`)}
    <p class="tl-legend"><span class="kind-model">model call</span> <span class="kind-tool">tool call</span> <span class="kind-delegate">delegation</span> <span class="kind-wait">wait</span> <span class="kind-barrier">barrier</span></p>
  </figure>`;
}

// One session's state: the REST window of its history, merged with its live events.
// Subscribe first, then read REST: events newer than the subscription point may also be in
// the REST page, so everything is keyed (messageId, approvalId, …) and merged, never appended.
import { useEffect, useReducer, useState } from './ui.mjs';
import { get, enc, socket } from './api.mjs';

const ROUNDS = 20;

const initial = {
  session: null, notFound: false, error: null, loaded: false,
  messages: [], nextBeforeSeq: null, loadingOlder: false,
  phase: null, phaseError: null,
  executions: {}, children: {}, approvals: {}, questions: {}, queued: [], compactions: [],
  deltas: {}, fileChanges: [], treeStatus: null, sideVersion: 0, reloadVersion: 0,
};

function mergeMessages(list, incoming) {
  const byId = new Map(list.map((m) => [m.messageId, m]));
  for (const m of incoming) byId.set(m.messageId, { ...byId.get(m.messageId), ...m });
  return [...byId.values()].filter((m) => !m.discarded).sort((a, b) => a.seq - b.seq);
}

function addExecution(state, exec) {
  const executions = { ...state.executions, [exec.executionId]: { ...state.executions[exec.executionId], ...exec } };
  const children = exec.parentToolCallId
    ? { ...state.children, [exec.parentToolCallId]: { childSessionId: exec.childSessionId, agentType: exec.agentType, executionId: exec.executionId } }
    : state.children;
  return { ...state, executions, children };
}

function applyEvent(state, f) {
  const d = f.data || {};
  switch (f.type) {
    case 'message': {
      const deltas = { ...state.deltas };
      delete deltas[d.messageId];
      const queued = state.queued.filter((q) => q.messageId !== d.messageId);
      return { ...state, messages: mergeMessages(state.messages, [{ ...d, createdAt: f.time }]), deltas, queued };
    }
    case 'assistant_delta': {
      if (state.messages.some((m) => m.messageId === d.messageId)) return state;
      return { ...state, deltas: { ...state.deltas, [d.messageId]: (state.deltas[d.messageId] || '') + d.text } };
    }
    case 'session_status': {
      // A turn that ends leaves the session unread until someone looks at it.
      const ended = ['COMPLETED', 'FAILED', 'CANCELLED'].includes(d.phase);
      const session = ended && state.session ? { ...state.session, unread: true } : state.session;
      return { ...state, session, phase: d.phase, phaseError: d.error || null };
    }
    case 'session_read': return { ...state, session: { ...state.session, unread: false } };
    case 'message_queued':
      if (state.queued.some((q) => q.messageId === d.messageId) || state.messages.some((m) => m.messageId === d.messageId)) return state;
      return { ...state, queued: [...state.queued, d] };
    case 'queued_messages_dropped':
      return { ...state, queued: state.queued.filter((q) => !d.messageIds.includes(q.messageId)) };
    case 'messages_discarded':
      return { ...state, messages: state.messages.filter((m) => !d.messageIds.includes(m.messageId)) };
    case 'subagent_session_created':
      return {
        ...state,
        children: { ...state.children, [d.toolCallId]: { childSessionId: d.childSessionId, agentType: d.agentType, executionId: d.executionId } },
        executions: { ...state.executions, [d.executionId]: { executionId: d.executionId, childSessionId: d.childSessionId, agentType: d.agentType, parentToolCallId: d.toolCallId, status: 'RUNNING', ...state.executions[d.executionId] } },
      };
    case 'execution_status':
      return { ...state, executions: { ...state.executions, [d.executionId]: { ...state.executions[d.executionId], executionId: d.executionId, status: d.status, deliveryStatus: d.deliveryStatus } } };
    case 'approval_requested':
      return { ...state, approvals: { ...state.approvals, [d.approvalId]: { status: 'pending', ...state.approvals[d.approvalId], ...d } } };
    case 'approval_resolved': {
      const status = { approve: 'approved', deny: 'denied' }[d.decision] || d.decision;
      return { ...state, approvals: { ...state.approvals, [d.approvalId]: { ...state.approvals[d.approvalId], status } } };
    }
    case 'question_asked':
      return { ...state, questions: { ...state.questions, [d.questionId]: { status: 'pending', ...state.questions[d.questionId], ...d } } };
    case 'question_resolved':
      return { ...state, questions: { ...state.questions, [d.questionId]: { ...state.questions[d.questionId], status: d.outcome } } };
    case 'compaction_recorded':
      if (state.compactions.some((c) => c.boundaryMessageId === d.boundaryMessageId)) return state;
      return { ...state, compactions: [...state.compactions, { ...d, time: f.time }] };
    case 'file_change':
      if (state.fileChanges.some((c) => c.changeId === d.changeId)) return state;
      return { ...state, fileChanges: [...state.fileChanges, d] };
    case 'session_updated': return { ...state, session: { ...state.session, ...d } };
    case 'session_tree_status': return { ...state, treeStatus: d };
    case 'side_session_created':
    case 'session_promoted':
    case 'session_archived':
    case 'session_unarchived':
      return { ...state, sideVersion: state.sideVersion + 1 };
    case 'session_forked': return { ...state, reloadVersion: state.reloadVersion + 1 };
    case 'session_deleted': return { ...state, notFound: true };
    default: return state;
  }
}

function reducer(state, action) {
  switch (action.kind) {
    case 'event': return applyEvent(state, action.frame);
    case 'loaded': {
      const { session, page, executions, approvals, questions, compactions } = action;
      let next = {
        ...state, loaded: true, session: { ...session, ...state.session },
        phase: state.phaseSeen ? state.phase : session.phase, phaseError: session.error || state.phaseError,
        messages: mergeMessages(state.messages, page.items), nextBeforeSeq: page.nextBeforeSeq,
      };
      for (const exec of executions) next = addExecution(next, exec);
      for (const a of approvals) next.approvals = { ...next.approvals, [a.approvalId]: { ...a, ...next.approvals[a.approvalId] } };
      for (const q of questions) next.questions = { ...next.questions, [q.questionId]: { ...q, ...next.questions[q.questionId] } };
      const known = new Set(next.compactions.map((c) => c.boundaryMessageId));
      next.compactions = [...next.compactions, ...compactions.filter((c) => !known.has(c.boundaryMessageId))];
      return next;
    }
    case 'older-start': return { ...state, loadingOlder: true };
    case 'older': return { ...state, loadingOlder: false, messages: mergeMessages(state.messages, action.page.items), nextBeforeSeq: action.page.nextBeforeSeq };
    case 'failed': return { ...state, loadingOlder: false, notFound: action.error.code === 'not_found', error: action.error };
    default: return state;
  }
}

function trackPhase(state, action) {
  const next = reducer(state, action);
  if (action.kind === 'event' && action.frame.type === 'session_status') next.phaseSeen = true;
  return next;
}

async function loadAll(sessionId) {
  const base = `/v1/sessions/${enc(sessionId)}`;
  const [session, page, executions, approvals, questions, compactions] = await Promise.all([
    get(base),
    get(`${base}/messages?rounds=${ROUNDS}`),
    get(`${base}/executions`),
    get(`${base}/approvals?status=pending`),
    get(`${base}/questions?status=pending`),
    get(`${base}/events?types=compaction_recorded`),
  ]);
  return {
    session, page, executions: executions.items, approvals: approvals.items, questions: questions.items,
    compactions: compactions.items.map((f) => ({ ...f.data, time: f.time })),
  };
}

// The phase each open session last showed, shared across tabs: a delegation card in the
// parent shows its child's phase (waiting for approval, …) from the child's own tab.
const phases = new Map();
const phaseListeners = new Set();

export function useSessionPhase(sessionId) {
  const [phase, setPhase] = useState(phases.get(sessionId) ?? null);
  useEffect(() => {
    const listener = (id, value) => { if (id === sessionId) setPhase(value); };
    phaseListeners.add(listener);
    setPhase(phases.get(sessionId) ?? null);
    return () => phaseListeners.delete(listener);
  }, [sessionId]);
  return phase;
}

export function useSessionStream(sessionId) {
  const [state, dispatch] = useReducer(trackPhase, initial);
  useEffect(() => {
    if (!state.loaded && !state.phaseSeen) return;
    phases.set(sessionId, state.phase);
    for (const fn of phaseListeners) fn(sessionId, state.phase);
  }, [sessionId, state.phase, state.loaded]);
  useEffect(() => {
    let alive = true;
    let loading = false;
    let loadedOnce = false;
    const load = () => {
      if (loading) return;
      loading = true;
      loadAll(sessionId).then(
        (data) => { if (alive) dispatch({ kind: 'loaded', ...data }); },
        (error) => { if (alive) dispatch({ kind: 'failed', error }); },
      ).finally(() => { loading = false; });
    };
    const off = socket.subscribe(sessionId, (frame) => {
      if (!alive) return;
      // REST after the subscription point, never before it: nothing can fall in between.
      if (frame.type === 'subscribed') { if (!loadedOnce) { loadedOnce = true; load(); } return; }
      if (frame.type === 'subscribe_failed') { dispatch({ kind: 'failed', error: frame.data }); return; }
      dispatch({ kind: 'event', frame });
    });
    return () => { alive = false; off(); };
  }, [sessionId, state.reloadVersion]);

  const loadOlder = async () => {
    if (state.nextBeforeSeq == null || state.loadingOlder) return;
    dispatch({ kind: 'older-start' });
    try {
      const page = await get(`/v1/sessions/${enc(sessionId)}/messages?rounds=${ROUNDS}&beforeSeq=${state.nextBeforeSeq}`);
      dispatch({ kind: 'older', page });
    } catch (error) {
      dispatch({ kind: 'failed', error });
    }
  };
  return [state, loadOlder];
}

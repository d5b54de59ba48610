// The rendering library (Preact + htm, vendored) and a few shared bits of UI.
import { h, render } from '../vendor/preact.mjs';
import { useState, useEffect, useRef, useReducer, useMemo, useCallback } from '../vendor/hooks.mjs';
import htm from '../vendor/htm.mjs';

export const html = htm.bind(h);
export { render, useState, useEffect, useRef, useReducer, useMemo, useCallback };

export function navigate(path) {
  history.pushState(null, '', path);
  window.dispatchEvent(new Event('muster:navigate'));
}

export function Link({ href, children, ...rest }) {
  const onClick = (ev) => {
    if (ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey) return;
    ev.preventDefault();
    navigate(href);
  };
  return html`<a href=${href} onClick=${onClick} ...${rest}>${children}</a>`;
}

const PHASE_LABEL = {
  RUNNING: 'running', WAITING_APPROVAL: 'waiting for approval', WAITING_INPUT: 'waiting for an answer',
  COMPLETED: 'completed', FAILED: 'failed', CANCELLING: 'cancelling', CANCELLED: 'cancelled',
};

export const isActive = (phase) =>
  phase === 'RUNNING' || phase === 'CANCELLING' || phase === 'WAITING_APPROVAL' || phase === 'WAITING_INPUT';

export function Phase({ phase }) {
  const label = PHASE_LABEL[phase] || 'idle';
  return html`<span class=${'phase phase-' + (phase || 'idle').toLowerCase()} data-phase=${phase || 'IDLE'}>
    ${phase === 'RUNNING' || phase === 'CANCELLING' ? html`<span class="spinner" aria-hidden="true"></span>` : null}
    ${label}</span>`;
}

export function ErrorNote({ error }) {
  if (!error) return null;
  return html`<p class="error" role="alert">${error.message || String(error)}</p>`;
}

export function shortTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

export function parseJson(text) {
  try { return JSON.parse(text); } catch { return null; }
}

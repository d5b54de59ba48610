// Markdown → sanitised HTML. Two layers: marked renders raw HTML blocks and inline tags as
// escaped text (so a model's or a tool's HTML is shown, never interpreted), and DOMPurify
// then keeps only plain formatting tags from what marked produced.
import { Marked } from '../vendor/marked.mjs';
import DOMPurify from '../vendor/purify.mjs';

const escapeHtml = (text) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

const marked = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  renderer: {
    html(token) { return escapeHtml(token.text ?? token.raw ?? ''); },
    image(token) { return escapeHtml(`![${token.text ?? ''}](${token.href ?? ''})`); },
  },
});

const PURIFY = {
  ALLOWED_TAGS: ['a', 'b', 'blockquote', 'br', 'code', 'del', 'em', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6',
    'hr', 'i', 'li', 'ol', 'p', 'pre', 'strong', 'table', 'tbody', 'td', 'th', 'thead', 'tr', 'ul', 'input', 'span'],
  ALLOWED_ATTR: ['href', 'title', 'type', 'checked', 'disabled', 'align'],
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
};

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') { node.setAttribute('rel', 'noopener noreferrer nofollow'); node.setAttribute('target', '_blank'); }
});

const cache = new Map();

export function markdownHtml(text) {
  const key = text || '';
  let out = cache.get(key);
  if (out === undefined) {
    out = DOMPurify.sanitize(marked.parse(key), PURIFY);
    if (cache.size > 3000) cache.clear();
    cache.set(key, out);
  }
  return out;
}

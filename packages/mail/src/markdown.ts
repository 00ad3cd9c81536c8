import { linkableUrl } from '@baton/domain/text';
import MarkdownIt from 'markdown-it';

/**
 * Markdown → HTML for mail bodies, with markdown-it: raw HTML in the source is escaped (not
 * passed through), links are only absolute http(s) and mailto (markdown-it's own check refuses
 * only javascript:, vbscript:, file: and data:, so `smb:` — which hands a Windows reader's
 * credentials to the server named —, `search-ms:`, `intent:` or `//host` had been links beside
 * the Approve button; they stay text), bare URLs become links. What an agent wrote cannot inject markup.
 * Images are never loaded: an image a mail client fetched would tell its server who reads the
 * mail and when (a tracking pixel, or data carried out in its URL, from text a model wrote after
 * reading the web). Each becomes a link (http(s)) or its alt text, as the console shows them.
 */
const md = new MarkdownIt({ html: false, linkify: true, typographer: false });
// A link to anything else keeps its text and loses its anchor (links do not nest: the next close is its own).
md.core.ruler.push('only_safe_links', (state) => {
  for (const block of state.tokens) {
    let dropping = false;
    for (const t of block.children ?? []) {
      if (t.type === 'link_open' && !linkableUrl(String(t.attrGet('href') ?? ''))) {
        dropping = true;
        Object.assign(t, { type: 'text', tag: '', nesting: 0, content: '', attrs: null });
      } else if (t.type === 'link_close' && dropping) {
        dropping = false;
        Object.assign(t, { type: 'text', tag: '', nesting: 0, content: '' });
      }
    }
  }
});
md.renderer.rules.image = (tokens, idx, options, env, self) => {
  const token = tokens[idx];
  const src = String(token?.attrGet('src') ?? '');
  const alt = String(self.renderInlineAsText(token?.children ?? [], options, env) || 'image');
  return /^https?:\/\//i.test(src) ? `<a href="${escapeHtml(src)}">[image: ${escapeHtml(alt)}]</a>` : `[image: ${escapeHtml(alt)}]`;
};

export const renderMarkdown = (source: string): string => md.render(source);

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Text for an HTML element or attribute. */
export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => ESCAPES[c] as string);

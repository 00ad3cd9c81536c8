import MarkdownIt from 'markdown-it';

/**
 * Markdown → HTML for mail bodies, with markdown-it: raw HTML in the source is escaped (not
 * passed through), links are only http(s)/mailto (markdown-it refuses javascript:, vbscript:,
 * file: and data: except images), bare URLs become links. What an agent wrote cannot inject markup.
 */
const md = new MarkdownIt({ html: false, linkify: true, typographer: false });

export const renderMarkdown = (source: string): string => md.render(source);

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Text for an HTML element or attribute. */
export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => ESCAPES[c] as string);

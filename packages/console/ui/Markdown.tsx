import Markdown from 'react-markdown';
import remarkGfm from 'remark-gfm';
import { linkableUrl } from '@baton/api/text';

/**
 * Markdown from agents and models (plans, reports, chat replies), rendered with GFM. An image is
 * shown as a link, not loaded: a report may name any URL, and loading it would tell that server
 * who reads the report, and when (a relative path would not resolve against the console anyway).
 * Raw HTML is not rendered (react-markdown's default).
 */
export function RenderedMarkdown({ children }: { children: string }) {
  return (
    <Markdown
      remarkPlugins={[remarkGfm]}
      // Only absolute http(s) and mailto are links (as in mails): smb:, search-ms:, //host and relative paths stay text;
      // a place in the page (a footnote and its way back) stays one too.
      urlTransform={(url) => (linkableUrl(url) || /^#[\w-]+$/.test(url) ? url : '')}
      components={{
        // A place in the page opens there; anything else in a new tab, without a referrer.
        a: ({ href, title, children }) =>
          href ? (
            <a href={href} title={title} {...(href.startsWith('#') ? {} : { target: '_blank', rel: 'noopener noreferrer' })}>
              {children}
            </a>
          ) : (
            <span>{children}</span>
          ),
        img: ({ src, alt }) =>
          typeof src === 'string' && src ? (
            <a className="image-link" href={src} target="_blank" rel="noopener noreferrer" title="an image the text names (not loaded)">
              image: {alt || src}
            </a>
          ) : (
            <span className="image-link">image: {alt || 'not linked'}</span>
          ),
      }}
    >
      {children}
    </Markdown>
  );
}

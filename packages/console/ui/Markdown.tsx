import Markdown from 'react-markdown';
import remarkGfm from 'remark-gfm';

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
      components={{
        img: ({ src, alt }) => (
          <a className="image-link" href={typeof src === 'string' ? src : undefined} target="_blank" rel="noopener noreferrer" title="an image the text names (not loaded)">
            image: {alt || (typeof src === 'string' ? src : '')}
          </a>
        ),
      }}
    >
      {children}
    </Markdown>
  );
}

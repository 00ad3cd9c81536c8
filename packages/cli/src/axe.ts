import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';

/** axe-core's browser build, injected into the page under test (a test's context needs `bypassCSP` if the page has a CSP). */
const AXE_SCRIPT = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

/** One rule axe-core finds broken: its id, how much it hurts, and the elements (CSS selectors) that break it. */
export interface AxeFinding {
  rule: string;
  impact: string;
  help: string;
  nodes: string[];
}

/**
 * What axe-core (the WCAG 2 A/AA rules and its best practices) finds serious or critical on the
 * page as it is now — for browser tests of the console: an empty list is the bar.
 */
export async function axeFindings(page: Page): Promise<AxeFinding[]> {
  if (!(await page.evaluate('typeof window.axe === "object"'))) await page.addScriptTag({ path: AXE_SCRIPT });
  const found = (await page.evaluate(`window.axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations.map((v) => ({ rule: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')) })))`)) as AxeFinding[];
  return found.filter((f) => f.impact === 'serious' || f.impact === 'critical');
}

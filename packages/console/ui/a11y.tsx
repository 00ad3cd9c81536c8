import { useEffect, useState, useSyncExternalStore } from 'react';

/**
 * What the console says to assistive technology, beside what it shows: one polite live region
 * (`<Announcer />`, once per page) that reads out what a person's action did ("Approved…") and
 * what changed on its own (a task's status, a new request). Each message is a node of its own, so
 * two in a row are both read, and the same words twice are read twice.
 */
let spoken: { id: number; text: string }[] = [];
let nextId = 1;
const listeners = new Set<() => void>();

export function announce(text: string): void {
  if (!text) return;
  spoken = [...spoken.slice(-2), { id: nextId++, text }]; // the last three: older ones were read already
  for (const f of listeners) f();
}

const subscribe = (f: () => void): (() => void) => {
  listeners.add(f);
  return () => listeners.delete(f);
};

export function Announcer() {
  const messages = useSyncExternalStore(subscribe, () => spoken);
  return (
    <div className="sr-only" role="status" aria-live="polite" data-announcer>
      {messages.map((m) => (
        <p key={m.id}>{m.text}</p>
      ))}
    </div>
  );
}

/**
 * Keyboard focus is never dropped to the page: when the focused control goes (its card was
 * decided, its task opened, the page changed), focus moves to the heading of the region it was in
 * — the nearest ancestor's `data-focus-home` names that heading's id — or else to the main content.
 * Installed once (main.tsx); returns how to remove it.
 */
export function keepFocus(doc: Document = document): () => void {
  let last: Element | null = null;
  let home: string | null = null;
  const onFocusIn = (e: FocusEvent): void => {
    last = e.target instanceof Element ? e.target : null;
    home = last?.closest<HTMLElement>('[data-focus-home]')?.dataset.focusHome ?? null;
  };
  const rescue = (): void => {
    if (!last || last.isConnected) return;
    const active = doc.activeElement;
    if (active && active !== doc.body) return; // focus went somewhere on its own
    last = null;
    const target = (home ? doc.getElementById(home) : null) ?? doc.getElementById('content');
    if (!target) return;
    // Scrolled to only if it is out of sight: a page that moved on meanwhile (a new task opened at its top) stays put.
    target.focus({ preventScroll: true });
    const top = target.getBoundingClientRect().top;
    if (top < 0 || top > (doc.defaultView?.innerHeight ?? 0)) target.scrollIntoView({ block: 'nearest' });
  };
  doc.addEventListener('focusin', onFocusIn);
  const watcher = new MutationObserver(rescue);
  watcher.observe(doc.body, { childList: true, subtree: true });
  return () => {
    doc.removeEventListener('focusin', onFocusIn);
    watcher.disconnect();
  };
}

/**
 * A control that is busy: said to be unavailable, but it keeps keyboard focus (a `disabled`
 * button drops it to the page). Its handler ignores a press meanwhile (`useAction`'s `run` does).
 */
export const busyProps = (busy: boolean): { 'aria-disabled'?: true } => (busy ? { 'aria-disabled': true } : {});

/** A field with a problem: marked invalid and described by the error line (`ErrorLine`'s `id`) that names it. */
export const invalidProps = (bad: boolean, errorId: string): { 'aria-invalid'?: true; 'aria-describedby'?: string } => (bad ? { 'aria-invalid': true, 'aria-describedby': errorId } : {});

/** How long after asking a press is taken for the rest of the click that asked, not a confirmation. */
const CONFIRM_ARMED_MS = 600;

/**
 * A button that ends something (a run): the first press asks ("Confirm cancel"), the second acts
 * — not the second click of a double-click (the confirmation is aria-disabled for CONFIRM_ARMED_MS
 * after the ask, and a press then is ignored). The ask holds while the button has focus, and lapses
 * when focus leaves it — never on a timer a person reading it could miss. `name`/`confirmName` are the accessible names, each
 * starting with the words shown.
 */
export function ConfirmButton({ label, confirmLabel, name, confirmName, busy = false, className = '', onConfirm, ...rest }: { label: string; confirmLabel: string; name?: string; confirmName?: string; busy?: boolean; className?: string; onConfirm: () => void } & Record<`data-${string}`, string>) {
  const [asking, setAsking] = useState(false);
  const [armed, setArmed] = useState(false);
  useEffect(() => {
    setArmed(false);
    if (!asking) return;
    const t = setTimeout(() => setArmed(true), CONFIRM_ARMED_MS);
    return () => clearTimeout(t);
  }, [asking]);
  return (
    <button
      {...rest}
      className={`${className}${asking ? ' danger' : ''}`.trim()}
      aria-label={asking ? (confirmName ?? confirmLabel) : (name ?? label)}
      {...busyProps(busy || (asking && !armed))}
      onBlur={() => setAsking(false)}
      onClick={() => {
        if (busy) return;
        if (!asking) {
          setAsking(true);
          announce(`Press ${confirmLabel} to confirm.`);
          return;
        }
        if (!armed) return; // the rest of a double-click
        setAsking(false);
        onConfirm();
      }}
    >
      {asking ? confirmLabel : label}
    </button>
  );
}

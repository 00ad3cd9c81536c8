/**
 * A time as a person reads it in a mail or on a mail page: `Sat, 28 Nov 2026, 11:52 UTC` (a mail
 * does not know its reader's time zone, so it says UTC); not a time: as given.
 */
export function humanTime(iso: string): string {
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return iso;
  const shown = at.toLocaleString('en-GB', { weekday: 'short', day: 'numeric', month: 'short', year: 'numeric', hour: '2-digit', minute: '2-digit', hour12: false, timeZone: 'UTC' });
  return `${shown} UTC`;
}

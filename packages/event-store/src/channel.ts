/** The NOTIFY channel an append signals on commit (the relay LISTENs). */
export const NOTIFY_CHANNEL = 'baton_events';

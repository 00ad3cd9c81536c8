import type { TeamInfo } from './api.ts';

/** Chat mode (the conversation view lands with the chat API). */
export function Chat({ chatId }: { chatId: string | null; teams: TeamInfo[] }) {
  return <p className="hint">Chat {chatId ?? ''}</p>;
}

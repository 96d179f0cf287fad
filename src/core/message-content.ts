// What a message carries, stored as JSON in messages.content. Outbound kinds match what the
// provider layer sends (src/providers/types.ts); inbound adds media references.

export interface MediaRef {
  type: string;
  url?: string | null;
  media_id?: string | null;
  mime_type?: string | null;
  caption?: string | null;
  filename?: string | null;
  sha256?: string | null;
}

export type MessageContent =
  | { kind: 'text'; text: string }
  | { kind: 'template'; template: { name: string; language: string; components?: unknown[] } }
  | { kind: 'email'; subject: string; html?: string; text?: string; fromName?: string; replyTo?: string }
  | { kind: 'media'; caption?: string | null; text?: string | null; media: MediaRef[] };

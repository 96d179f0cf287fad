// The channels a message travels on: the one list the schema, core, the gateway kinds and the
// providers name.

export const CHANNEL_TYPES = ['whatsapp', 'messenger', 'instagram', 'sms', 'email'] as const;

export type ChannelType = (typeof CHANNEL_TYPES)[number];

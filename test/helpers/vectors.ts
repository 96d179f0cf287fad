// Signature test vectors from shared/providers/FACTS.md, byte for byte: tests check msgd's
// verification against the providers' own published examples.

// The facts from FACTS.md A3, byte for byte.
export const META_VECTOR = {
  secret: 'test_app_secret',
  body: '{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},"contacts":[{"profile":{"name":"J\\u00fcrgen"},"wa_id":"16505551234"}],"messages":[{"from":"16505551234","id":"wamid.TEST1","timestamp":"1739321024","type":"text","text":{"body":"Gr\\u00fc\\u00df dich"}}]},"field":"messages"}]}]}',
  sha256: 'sha256=c73ec124ec29ef1b982ad9192ee0cd75f52f32f81b692cfb9133d50e511d7cf2',
  sha1: 'sha1=df1b0b60f3b3e0a3fe94e1c6f225184044c678b5',
};

// FACTS.md C3, the official @sendgrid/eventwebhook vector.
export const SENDGRID_VECTOR = {
  publicKey:
    'MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA==',
  timestamp: '1588788367',
  payload: '{"category":"example_payload","event":"test_event","message_id":"message_id"}',
  signature: 'MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0=',
};

// FACTS.md D2/D4.
export const TWILIO_STATUS_FORM =
  'AccountSid=AC00000000000000000000000000000000&ApiVersion=2010-04-01&From=%2B15017250604&MessageSid=SM11111111111111111111111111111111&MessageStatus=delivered&SmsSid=SM11111111111111111111111111111111&SmsStatus=delivered&To=%2B15558675310&RawDlrDoneDate=2508171206';

import type { NodemailerError } from 'nodemailer';
import { notSent } from '../http.js';
import type { SendResult } from '../types.js';

/** Refusals without an SMTP reply that a retry would meet again: bad address, credentials or config. */
const CONFIG_CODES = new Set(['EENVELOPE', 'EAUTH', 'ENOAUTH', 'ECONFIG', 'EMESSAGE', 'EREQUIRETLS', 'EMAXRECIPIENTS']);

export function classifySmtpError(err: NodemailerError): SendResult {
  const rc = typeof err.responseCode === 'number' ? err.responseCode : undefined;
  const message = (err.response ?? err.message ?? String(err)).slice(0, 1000);
  if (rc !== undefined) {
    // RFC 5321: 4yz is transient. 503 (bad sequence) is a session hiccup, not a verdict on the mail.
    // A 4yz to RCPT TO defers this one recipient (greylisting, a full mailbox): the relay works.
    // 421 is the relay closing the session, whatever the command.
    if (rc >= 400 && rc < 500 && rc !== 421 && err.command === 'RCPT TO')
      return { outcome: 'retry', code: `smtp_${rc}`, message, recipient: true };
    if ((rc >= 400 && rc < 500) || rc === 503) return { outcome: 'retry', code: `smtp_${rc}`, message };
    if (rc >= 500 && rc < 600) {
      // RFC 3463 5.1.x: the address itself is bad (no such mailbox, no such domain): a hard bounce.
      return /(^|\D)5\.1\.\d{1,3}(\D|$)/.test(message)
        ? {
            outcome: 'failed',
            code: `smtp_${rc}`,
            message,
            suppress: { reason: 'hard_bounce', scope: 'partner', detail: message.slice(0, 300) },
          }
        : { outcome: 'failed', code: `smtp_${rc}`, message };
    }
  }
  const code = err.code ?? 'EUNKNOWN';
  if (CONFIG_CODES.has(code)) return { outcome: 'failed', code: `smtp_${code.slice(1).toLowerCase()}`, message };
  // Refused, reset, timed out, DNS, TLS handshake: retry. A session that dies once it is under
  // way may have handed the mail over by then; one that never got past connecting, the greeting
  // or the TLS upgrade cannot have (nodemailer reports every socket failure as command CONN, so
  // the stage is told by the error itself).
  const maybeDelivered = !beforeMail(err);
  if (code === 'ETIMEDOUT') return { outcome: 'retry', code: 'timeout', message, maybeDelivered };
  const cause = err.originalCode ? `${code}/${err.originalCode}` : code;
  return { outcome: 'retry', code: 'network_error', message: `${cause}: ${message}`, maybeDelivered };
}

/** Timeouts of the phases before the session could carry mail (nodemailer's timeoutType). */
const SETUP_TIMEOUTS = new Set(['CONNECT_TIMEOUT', 'GREETING_TIMEOUT', 'UPGRADE_TIMEOUT']);

/** Whether the session failed before it could have sent the mail: connecting, DNS, the greeting, TLS. */
function beforeMail(err: NodemailerError & { timeoutType?: string }): boolean {
  if (err.code === 'EDNS' || err.code === 'ETLS') return true;
  if (err.code === 'ETIMEDOUT' && err.timeoutType !== undefined) return SETUP_TIMEOUTS.has(err.timeoutType);
  return notSent(err.originalCode ?? err.code);
}

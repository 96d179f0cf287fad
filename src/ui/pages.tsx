import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ReactNode } from 'react';
import type { SessionUser } from '../core/ui-sessions.js';
import type { Area } from '../core/users.js';
import { formatMoney } from '../lib/money.js';
import { csrfToken, userFor, type Ui } from './context.js';
import { Page, sendPage } from './layout.js';

// What a signed-in page handler needs: its user, the CSRF token for its forms, and a way to
// send the page in the frame.

export interface PageCtx {
  user: SessionUser;
  csrf: string;
  render(title: string, body: ReactNode, status?: number): FastifyReply;
}

export function pageCtx(ui: Ui, req: FastifyRequest, reply: FastifyReply, area: Area): PageCtx {
  const user = userFor(req, area);
  const csrf = csrfToken(ui, req, reply);
  return {
    user,
    csrf,
    render: (title, body, status = 200) =>
      sendPage(
        reply,
        <Page title={title} user={user} csrf={csrf} active={area}>
          {body}
        </Page>,
        status,
      ),
  };
}

/** Where partners reach msgd: server.publicUrl, else the host this request came to. */
export function publicBase(ui: Ui, req: FastifyRequest): string {
  return ui.rt.config.server.publicUrl?.replace(/\/+$/, '') ?? `${req.protocol}://${req.headers.host ?? 'localhost'}`;
}

export const money = (micro: number, currency: string) => `${formatMoney(micro)} ${currency}`;

export const StatusText = ({ status }: { status: string }) => <span className={`status ${status}`}>{status}</span>;

/** A filter's drop-down: "any" first, then each value as its own label. */
export function AnyOf({
  name,
  label,
  value,
  options,
}: {
  name: string;
  label: string;
  value?: string;
  options: readonly string[];
}) {
  return (
    <div>
      <label htmlFor={`f-${name}`}>{label}</label>
      <select id={`f-${name}`} name={name} defaultValue={value ?? ''}>
        <option value="">any</option>
        {options.map((o) => (
          <option key={o} value={o}>
            {o}
          </option>
        ))}
      </select>
    </div>
  );
}

import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupTmp, cliStore, runCli, runJson } from '../helpers/cli.js';

afterAll(cleanupTmp);

describe('msgctl doctor and retention', () => {
  it('warns when outbound events or provider webhooks outlive the message content retention', async () => {
    const s = await cliStore();
    const { dataDir } = s;
    const config = (retention: object) => {
      const file = join(dirname(dataDir), `c${Math.random().toString(36).slice(2)}.json`);
      writeFileSync(file, JSON.stringify(retention));
      return file;
    };
    const short = await runCli(['--config', config({ retention: { messageContentDays: 7 } }), 'doctor'], s.opts());
    expect(short.code, short.stderr).toBe(0);
    expect(short.stdout).toMatch(
      /warn +retention +retention\.messageContentDays is 7 but webhooksOut\.retentionDays is 30, webhooksIn\.retentionDays is 30: message content stays there that long/,
    );
    const aligned = await runJson(
      [
        '--config',
        config({
          retention: { messageContentDays: 7 },
          webhooksOut: { retentionDays: 7 },
          webhooksIn: { retentionDays: 5 },
        }),
        'doctor',
      ],
      s.opts(),
    );
    expect(aligned.checks.map((c: { name: string }) => c.name)).not.toContain('retention');
    const off = await runJson(['doctor'], s.opts());
    expect(off.checks.map((c: { name: string }) => c.name)).not.toContain('retention');
    await s.drop();
  });
});

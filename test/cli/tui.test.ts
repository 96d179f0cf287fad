import { afterAll, describe, expect, it } from 'vitest';
import { cleanupTmp, cliStore, runCli } from '../helpers/cli.js';

// msgctl tui without a terminal: a clear refusal that names the commands doing the same work.

afterAll(cleanupTmp);

describe('msgctl tui without a terminal', () => {
  it('exits 2 and names the msgctl commands that do the same work', async () => {
    const s = await cliStore();
    const r = await runCli(['tui'], s.opts());
    await s.drop();
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('msgctl tui needs an interactive terminal (stdin and stdout a TTY).');
    expect(r.stderr).toContain('msgctl token issue|revoke, msgctl balance topup|adjust');
    expect(r.stderr).toContain('msgctl webhooks log --follow');
  });

  it('is listed in msgctl --help', async () => {
    const r = await runCli(['--help']);
    expect(r.stdout).toMatch(/tui\s+the operator console/);
  });
});

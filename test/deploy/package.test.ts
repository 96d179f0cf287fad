import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';

// The manifest as it goes into the package (npm pack copies package.json unchanged): what an
// operator's `npm install --omit=dev ./msgd-<version>.tgz` runs and warns about.

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const fromRoot = createRequire(join(ROOT, 'package.json'));

describe('package.json', () => {
  it('has no script npm would run, or flag, when the package is installed', () => {
    // `prepare` would run tsc, and no tsconfig.json ships: npm's install-scripts notice names it.
    for (const s of ['preinstall', 'install', 'postinstall', 'preprepare', 'prepare', 'postprepare']) {
      expect(pkg.scripts, s).not.toHaveProperty(s);
    }
    // npm pack builds dist/ first, so a package never carries a stale build.
    expect(pkg.scripts.prepack).toBe(pkg.scripts.build);
  });

  it("resolves fastify's cookie dependency to a version made for every Node line msgd supports", () => {
    const fromFastify = createRequire(fromRoot.resolve('fastify/package.json'));
    const lmr = dirname(fromFastify.resolve('light-my-request/package.json'));
    const cookie = JSON.parse(
      readFileSync(createRequire(join(lmr, 'index.js')).resolve('cookie/package.json'), 'utf8'),
    );
    const needs = Number(/^>=\s*(\d+)/.exec(cookie.engines?.node ?? '>=0')?.[1]);
    const supported = Number(/^>=\s*(\d+)/.exec(pkg.engines.node)?.[1]);
    expect(needs, `cookie@${cookie.version} needs Node ${cookie.engines?.node}`).toBeLessThanOrEqual(supported);
  });

  it("fastify's inject() sends cookies with the overridden cookie package", async () => {
    const app = Fastify();
    app.get('/', async (req) => ({ cookie: req.headers.cookie }));
    const r = await app.inject({ url: '/', cookies: { session: 'a b', csrf: 'x' } });
    expect(r.json()).toEqual({ cookie: 'session=a%20b; csrf=x' });
    await app.close();
  });
});

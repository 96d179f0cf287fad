// A partner endpoint for the outbound-webhook benchmark: HTTPS with keep-alive, answers 204 at
// once and counts requests. Verification is the partner's cost, not msgd's, so it is skipped.
import https from 'node:https';
import { readFileSync } from 'node:fs';

let count = 0;
const server = https.createServer(
  { key: readFileSync(process.env.KEY), cert: readFileSync(process.env.CERT) },
  (req, res) => {
    req.resume();
    req.on('end', () => {
      count++;
      res.writeHead(204);
      res.end();
    });
  },
);
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => {
  process.stdout.write(`requests ${count}\n`);
  process.exit(0);
});

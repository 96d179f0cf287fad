// A minimal Twilio Messages.json stand-in for throughput runs: answers 201 with a fresh SID
// after LATENCY_MS. The full-fidelity fakes (test/fakes) check far more and are used by the
// tests; this one must not be the bottleneck of a 10,000 msg/s measurement.
import { createServer } from 'node:http';
import { randomBytes } from 'node:crypto';

const latency = Number(process.env.LATENCY_MS ?? 0);
let count = 0;
const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    count++;
    const answer = () => {
      const sid = 'SM' + randomBytes(16).toString('hex');
      const body = JSON.stringify({ sid, status: 'queued', num_segments: '1', error_code: null, error_message: null });
      res.writeHead(201, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    };
    if (latency > 0) setTimeout(answer, latency);
    else answer();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => {
  process.stdout.write(`requests ${count}\n`);
  process.exit(0);
});

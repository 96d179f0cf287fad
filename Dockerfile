# msgd's container image. Built in CI elsewhere (these machines have no container engine):
#   docker build -t msgd .
#   docker run -d --name msgd -p 127.0.0.1:8080:8080 -v msgd-data:/var/lib/msgd --stop-timeout 60 msgd
# Its build and install steps are the ones every CI run takes (.ci/run's npm ci, then
# .ci/pack-smoke: npm pack, npm install --omit=dev of the tarball into an empty directory, msgd
# started with this image's environment, probed with its health check, stopped with SIGTERM);
# test/deploy/container.test.ts keeps the two the same.
# Compose: deploy/compose.yaml. Guide: docs/deploy.md, "Container".

# Build: every dependency (TypeScript among them), then the package exactly as `npm pack`
# makes it. The toolchain compiles better-sqlite3 where no prebuilt binary fits the platform.
FROM node:22-bookworm-slim AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 make g++ \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN mkdir /pkg && npm pack --pack-destination /pkg
# Then the tarball into an empty directory, production dependencies only, as an operator
# installs it (docs/deploy.md); here, where the toolchain is.
WORKDIR /opt/msgd
RUN npm init -y >/dev/null \
    && npm install --no-audit --no-fund --omit=dev /pkg/msgd-*.tgz \
    && npm cache clean --force

# Run: Node and the installed package, no toolchain, no npm step at start.
FROM node:22-bookworm-slim
# A fixed uid and gid (10001), so files given to the container (a config file, the master key
# as a Compose secret) can be made readable by msgd alone: chown 10001:10001, chmod 0600.
RUN groupadd --system --gid 10001 msgd \
    && useradd --system --uid 10001 --gid msgd --home-dir /var/lib/msgd --shell /usr/sbin/nologin msgd \
    && install -d -o msgd -g msgd -m 0700 /var/lib/msgd
COPY --from=build /opt/msgd /opt/msgd
# Listen on every interface of the container (publish the port on 127.0.0.1 of the host, behind
# the TLS proxy); the data directory is the volume. The demo prints a live token at first
# start: off, as under systemd. Mount a config file and set MSGD_CONFIG for the rest.
ENV NODE_ENV=production \
    MSGD_DATA_DIR=/var/lib/msgd \
    MSGD_HOST=0.0.0.0 \
    MSGD_PORT=8080 \
    MSGD_DEMO=false
USER msgd
WORKDIR /var/lib/msgd
VOLUME /var/lib/msgd
EXPOSE 8080
# Ready means msgd can keep what it accepts (the database takes a write, the disk has room).
# Node itself makes the request: the slim image has no curl or wget. Three misses, 30 s apart,
# before "unhealthy" leave room for migrations at start (compose.yaml adds a start_period;
# dockerfilelint 1.8 misreads --start-period here).
HEALTHCHECK --interval=30s --timeout=5s --retries=3 \
    CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.MSGD_PORT||8080)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# msgd is PID 1 (bin/msgd execs node through env): it handles SIGTERM and SIGINT itself,
# finishing provider calls in flight before it exits, and starts no child processes, so
# there are no zombies for an init to reap. Give it the time systemd gives it (the unit's
# TimeoutStopSec=60): docker stop's default is 10 s, then SIGKILL.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opt/msgd/node_modules/.bin/msgd"]
CMD ["--no-demo"]

# syntax=docker/dockerfile:1
# Floodgate's container image (docs/deployment.md). The first stage installs every dependency and
# makes the package as `npm pack` makes it: the compiled gateway and the built dashboard. The
# runtime stage holds that package with its production dependencies only, as the lockfile pins
# them, and runs it as the unprivileged `node` user.

FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# No install scripts: the dashboard is built below, once the sources are in, and the image brings
# its own Node (the devDependency `node` pins one for developers' machines).
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY . .
# prepack compiles src/ into dist/ and builds the dashboard into dist/dashboard.
RUN npm pack --pack-destination /tmp \
 && mkdir /app \
 && tar -xzf /tmp/floodgate-*.tgz -C /app --strip-components=1 \
 && cp package-lock.json /app/

FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    SQLITE_PATH=/data/floodgate.db
WORKDIR /app
COPY --from=build /app ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force \
 && mkdir /data \
 && chown node:node /data
USER node
VOLUME /data
EXPOSE 8080
# Liveness from inside the container: the slim image has no curl, Node has fetch.
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# The gateway is PID 1 and handles SIGTERM itself: it drains (GET /ready answers 503 while the
# requests in flight finish), writes its usage records, closes storage and exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "bin/floodgate.js"]

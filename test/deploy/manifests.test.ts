/**
 * The example deployments hold together: their configuration passes `check-config` with the
 * environment each gives the gateway (and fails without a master key, as the gateway would), the
 * Kubernetes ConfigMap carries the same file, and the probes, drain and grace periods agree with
 * what the gateway does.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { checkConfigFile } from '../../src/config/check.ts';
import { writeConfig } from '../config/helpers.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');
const CONFIG = read('deploy/floodgate.yaml');
const SHUTDOWN_GRACE_SECONDS = (parse(CONFIG) as { server: { shutdown_grace_seconds: number } }).server.shutdown_grace_seconds;

type Json = Record<string, any>;
const manifests = parseAllDocuments(read('deploy/kubernetes/floodgate.yaml')).map((doc) => doc.toJS() as Json);
const kind = (name: string): Json => manifests.find((m) => m.kind === name)!;

describe('deploy/compose.yaml', () => {
  const compose = parse(read('deploy/compose.yaml')) as Json;
  const gateway = compose.services.floodgate;

  it('runs three gateway replicas behind a load balancer, with PostgreSQL and Redis', () => {
    assert.equal(gateway.deploy.replicas, 3);
    assert.deepEqual(Object.keys(compose.services).sort(), ['floodgate', 'lb', 'postgres', 'redis']);
    assert.deepEqual(gateway.build, { context: '..', dockerfile: 'Dockerfile' });
    assert.ok(gateway.volumes.includes(`./floodgate.yaml:${gateway.environment.FLOODGATE_CONFIG}:ro`));
    assert.ok(parseInt(gateway.stop_grace_period, 10) > SHUTDOWN_GRACE_SECONDS, 'docker waits longer than the drain before it kills');
  });

  it('gives the gateway a configuration check-config passes, and that fails without a master key', () => {
    const env = { ...gateway.environment, MASTER_KEY: 's3cret', OPENAI_API_KEY: 'sk-x' } as Record<string, string>;
    const { dir, file } = writeConfig(CONFIG);
    const ok = checkConfigFile(file, env, dir);
    assert.equal(ok.ok, true, ok.lines.join('\n'));
    assert.ok(ok.lines.includes('  storage: postgres; usage tracking on'), ok.lines.join('\n'));
    const open = checkConfigFile(file, { ...env, MASTER_KEY: '' }, dir);
    assert.equal(open.ok, false);
    assert.match(open.lines.join('\n'), /server\.master_key: refusing to listen on non-loopback HOST 0\.0\.0\.0 without MASTER_KEY/);
  });
});

describe('deploy/kubernetes/floodgate.yaml', () => {
  const deployment = kind('Deployment');
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];

  it('has the ConfigMap (deploy/floodgate.yaml as it is), the Secret, the Deployment, the Service and a disruption budget', () => {
    assert.deepEqual(manifests.map((m) => m.kind), ['ConfigMap', 'Secret', 'Deployment', 'Service', 'PodDisruptionBudget']);
    assert.equal(kind('ConfigMap').data['floodgate.yaml'], CONFIG);
    const secret = kind('Secret').stringData as Record<string, string>;
    const { dir, file } = writeConfig(kind('ConfigMap').data['floodgate.yaml']);
    const checked = checkConfigFile(file, secret, dir);
    assert.equal(checked.ok, true, checked.lines.join('\n'));
    assert.equal(deployment.spec.replicas, 3);
    assert.equal(kind('Service').spec.ports[0].targetPort, container.ports[0].name);
    assert.equal(container.ports[0].containerPort, 8080);
    assert.deepEqual(container.env, [{ name: 'FLOODGATE_CONFIG', value: `${container.volumeMounts[0].mountPath}/floodgate.yaml` }]);
  });

  it('probes liveness on /health and readiness on /ready, pauses before SIGTERM, and waits out the drain', () => {
    assert.equal(container.livenessProbe.httpGet.path, '/health');
    assert.equal(container.readinessProbe.httpGet.path, '/ready');
    assert.equal(container.startupProbe.httpGet.path, '/health');
    const [sleep, seconds] = container.lifecycle.preStop.exec.command as [string, string];
    assert.equal(sleep, 'sleep');
    assert.ok(pod.terminationGracePeriodSeconds > Number(seconds) + SHUTDOWN_GRACE_SECONDS, 'the kill comes after the pause and the whole drain');
    assert.equal(pod.securityContext.runAsNonRoot, true);
    assert.equal(deployment.spec.strategy.rollingUpdate.maxUnavailable, 0);
  });
});

import fs from 'node:fs'
import path from 'node:path'
import YAML from 'yaml'
import { ROOT } from './petstore-process.js'

// The Prometheus Operator loads rules from a PrometheusRule object, not from a rules file, and Kustomize
// cannot make one from a file (a configMapGenerator makes ConfigMaps only). So ops/kubernetes/prometheus-rule.yaml
// is generated from ops/prometheus/rules.yml, which stays the one place the rules are written, and
// test/ops/kubernetes.test.ts fails when the two differ. `npm run generate:prometheus-rule` writes it.

export const RULES_FILE = path.join(ROOT, 'ops', 'prometheus', 'rules.yml')
export const PROMETHEUS_RULE_FILE = path.join(ROOT, 'ops', 'kubernetes', 'prometheus-rule.yaml')

/** The PrometheusRule holding the groups of `rules` (the text of a Prometheus rules file), exactly. */
export function prometheusRule(rules: string): string {
  const { groups } = YAML.parse(rules) as { groups: unknown[] }
  const rule = {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: { name: 'petstore', labels: { 'app.kubernetes.io/name': 'petstore' } },
    spec: { groups },
  }
  return (
    '# Generated from ops/prometheus/rules.yml by `npm run generate:prometheus-rule`: change that file, then run it.\n' +
    "# The reasons for each rule, and the runbooks, are in rules.yml and docs/observing.md. A Prometheus Operator\n" +
    '# whose ruleSelector asks for a label (kube-prometheus-stack: release=<its name>) needs it added in an overlay.\n' +
    YAML.stringify(rule, { lineWidth: 0 })
  )
}

if (path.resolve(process.argv[1] ?? '') === import.meta.filename) {
  fs.writeFileSync(PROMETHEUS_RULE_FILE, prometheusRule(fs.readFileSync(RULES_FILE, 'utf8')))
  process.stdout.write(`wrote ${path.relative(ROOT, PROMETHEUS_RULE_FILE)}\n`)
}

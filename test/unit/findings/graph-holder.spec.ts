import { graphHolderRule } from '../../../src/analysis/findings/graph-holder';
import { c08Inventory, graphHolder } from '../fixtures';
import { facts, MiB, trans } from './helpers';

describe('graph-holder', () => {
  it('C08: val_losses keeps 1 GiB on cuda:0: a warning, fixed by detaching', () => {
    const [finding] = graphHolderRule(facts(c08Inventory()));
    expect(finding).toMatchObject({
      kind: 'graph-holder',
      id: 'graph-holder:val_losses',
      severity: 'warning',
      subject: 'val_losses',
      bytes: { 'cuda:0': 1024 * MiB },
      fix: { kind: 'detach', name: 'val_losses' }
    });
    expect(finding.explain(trans)).toBe(
      'val_losses keeps 4 autograd graphs alive (~1.0 GiB): store loss.item() or loss.detach(), or run evaluation under torch.no_grad().'
    );
  });

  it('below 64 MiB on one device it is info; a nested path has no button', () => {
    const inventory = {
      ...c08Inventory(),
      graphs: [
        graphHolder({
          name: 'stats',
          path: "stats['loss']",
          bytes: { 'cuda:0': 63 * MiB },
          count: 1
        })
      ]
    };
    const [finding] = graphHolderRule(facts(inventory));
    expect(finding.severity).toBe('info');
    expect(finding.fix).toEqual({ kind: 'none' });
  });
});

describe('graph-holder: outputs and shared graphs (agent 0.12.0)', () => {
  const out = graphHolder({
    name: 'Out[9]',
    path: 'Out[9]',
    container: 'tensor',
    count: 1,
    gradFn: 'DivBackward0',
    root: 'output',
    names: ['Out[9]', '_9', '_'],
    valueId: '0x7f00aa',
    bytes: { 'cuda:0': 1024 * MiB },
    sharedWith: ['val_losses']
  });

  it('a displayed mean is a finding of its own, with the names IPython gave it and a fix', () => {
    const [finding] = graphHolderRule(
      facts({ ...c08Inventory(), graphs: [{ ...out, sharedWith: undefined }] })
    );
    expect(finding).toMatchObject({
      id: 'graph-holder:Out[9]',
      severity: 'warning',
      subject: 'Out[9]',
      fix: { kind: 'detach', name: 'Out[9]' }
    });
    expect(finding.explain(trans)).toBe(
      'The displayed output Out[9] (Out[9], _9, _) keeps 1 autograd graph alive (~1.0 GiB): it was computed from tensors with a grad_fn. Evaluate under torch.no_grad(), or show loss.item(). Fix… keeps its value and drops the graph.'
    );
  });

  it('a list whose mean is displayed says its Fix… detaches the output too', () => {
    const inventory = c08Inventory();
    const [listed] = inventory.graphs;
    const findings = graphHolderRule(
      facts({
        ...inventory,
        graphs: [{ ...listed, sharedWith: ['Out[9]', 'm'] }, out]
      })
    );
    const text = findings
      .find(f => f.id === 'graph-holder:val_losses')!
      .explain(trans);
    expect(text).toContain(
      'The displayed output Out[9] keeps the same graphs: Fix… detaches it too.'
    );
    // a variable is never detached by another's fix: said, not done
    expect(text).toContain(
      'm also keeps some of these graphs: what they saved stays while it does.'
    );
    // a holder with no Fix… (a path inside the variable) promises no detach
    const nested = graphHolderRule(
      facts({
        ...inventory,
        graphs: [
          { ...listed, path: "val_losses['x']", sharedWith: ['Out[9]'] },
          out
        ]
      })
    ).find(f => f.id === 'graph-holder:val_losses')!;
    expect(nested.fix).toEqual({ kind: 'none' });
    expect(nested.explain(trans)).not.toContain('Fix… detaches it too');
    expect(nested.explain(trans)).toContain(
      'Out[9] also keeps some of these graphs'
    );
  });

  it('an output without its valueId, or with a path inside it, has no Fix…', () => {
    const findings = graphHolderRule(
      facts({
        ...c08Inventory(),
        graphs: [
          { ...out, valueId: undefined },
          { ...out, name: 'Out[10]', path: 'Out[10][0].loss' }
        ]
      })
    );
    expect(findings.map(f => f.fix)).toEqual([
      { kind: 'none' },
      { kind: 'none' }
    ]);
  });
});

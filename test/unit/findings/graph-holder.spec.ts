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

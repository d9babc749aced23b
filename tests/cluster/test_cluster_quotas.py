"""Client quotas across brokers: an AlterClientQuotas
sent to one broker is agreed in etcd (the seam the dynamic broker defaults
use) and every broker describes it; a removal through another broker
reaches them all too.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients"))

from harness import wait_for  # noqa: E402
from quota_setup import alter_client_quotas, describe_client_quotas  # noqa: E402

ALICE = (("user", "alice"),)


def test_a_client_quota_is_agreed_and_described_by_every_broker(cluster_factory):
    c = cluster_factory()
    ids = sorted(c.brokers)
    said = alter_client_quotas(c.addr(ids[0]), [([("user", "alice")],
                                                 {"producer_byte_rate": 4096})])
    assert said == [(0, None)]
    for b in ids:
        wait_for(lambda b=b: describe_client_quotas(c.addr(b))[1].get(ALICE) or None, 15,
                 f"broker {b} to describe alice's quota")
        assert describe_client_quotas(c.addr(b))[1][ALICE] == {"producer_byte_rate": 4096.0}
    said = alter_client_quotas(c.addr(ids[1]), [([("user", "alice")],
                                                 {"producer_byte_rate": None})])
    assert said == [(0, None)]
    for b in ids:
        wait_for(lambda b=b: ALICE not in describe_client_quotas(c.addr(b))[1] or None, 15,
                 f"broker {b} to drop alice's quota")

"""``--slo`` given twice adds to the SLOs rather than replacing the first, as argparse's default would do silently."""
import pytest

from llmsched.capacity.slo import slos_with_attainment
from llmsched.cli.commands import build_parser


@pytest.mark.parametrize("command", [["capacity"], ["plan"], ["tune", "--scheduler", "sarathi"]])
def test_each_slo_option_adds(command):
    args = build_parser().parse_args([*command, "--slo", "ttft_p50<=2s", "--slo", "tbt_p99<=200ms,e2e_p90<=30s"])
    slos = slos_with_attainment(args.slo, 0.9)
    assert [s.metric for s in slos] == ["ttft_p50", "tbt_p99", "e2e_p90", "attainment"]


def test_no_slo_is_stability_only():
    assert slos_with_attainment(build_parser().parse_args(["capacity"]).slo, None) == []
    assert slos_with_attainment("", None) == []

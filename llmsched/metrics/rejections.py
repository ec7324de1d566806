"""Why a run's requests were rejected and what to change so they are served: one line for a run's warning and
for a capacity search that found no rate (a run whose requests cannot fit fails every SLO at every rate)."""
from __future__ import annotations

# (text in a rejection reason, the fix a user makes): the reasons llmsched.engine.replica gives for a request that
# can never be served whatever the policy
FIXES = (
    ("exceed max_model_len", "a model with a longer context (--model; `llmsched presets` lists each one's ctx), "
                             "or requests that fit it"),
    ("KV blocks at its longest", "more KV memory per replica (a larger --gpu, a higher --tp, "
                                 "--gpu-memory-utilization or --kv-cache-dtype fp8)"),
)
NOTABLE_SHARE = 0.05  # a share of rejected requests worth a warning: as much as a stable run may leave unserved


def never_served(reason: str) -> bool:
    """Is ``reason`` one the replica gives for a request no policy and no arrival rate can serve (FIXES)? A
    rejection for load (a policy's admission control, a preemption limit) is not."""
    return any(text in reason for text, _ in FIXES)


def fix_for(reason: str) -> str:
    return next((fix for text, fix in FIXES if text in reason), "")


def rejection_note(rejected: int, offered: int, reasons: list[dict]) -> str:
    """'N of M requests (P%) were rejected, the most for: REASON (K); fix: ...'; '' when none was.

    ``reasons`` is a summary's list (``counts.reasons``: reason, count, example), most frequent first."""
    if rejected <= 0 or offered <= 0:
        return ""
    note = f"{rejected} of {offered} requests ({rejected / offered:.0%}) were rejected"
    if reasons:
        top = reasons[0]
        note += f", the most ({top['count']}) for: {top['example']}"
        fix = fix_for(top["example"])
        if fix:
            note += f"; to serve them: {fix}"
    return note

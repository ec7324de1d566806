"""Request traces and real servers' logs, each read as its authors publish it, and a trace replayed in time; what a
trace's prompts share (block ids, the offline prefix-cache count)."""

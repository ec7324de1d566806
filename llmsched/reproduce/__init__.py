"""The papers' headline experiments: each module here is a `llmsched reproduce NAME` command."""

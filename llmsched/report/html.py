"""Self-contained HTML pages (plan --report, compare --report): escaped tables whose columns sort on a click,
figures embedded as base64 PNG, one style sheet and a few lines of script inline; nothing loaded from elsewhere."""
from __future__ import annotations

import base64
import html

STYLE = ("body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;margin:1em 0;"
         "font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}th{background:#eee}"
         "th{cursor:pointer;white-space:nowrap}th[data-dir=asc]::after{content:' \\25B2'}"
         "th[data-dir=desc]::after{content:' \\25BC'}td.num{text-align:right;font-variant-numeric:tabular-nums}"
         "td.key,th.key{background:#fff3c4;font-weight:bold}th.key{background:#f5dd8a}"
         "code{background:#f4f4f4;padding:1px 3px;word-break:break-all}img{max-width:100%;height:auto}"
         ".wide{overflow-x:auto}dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dt{font-weight:bold}dd{margin:0}")
# Click a header to sort its table by that column (numbers as numbers, '—' last), again to reverse.
SORT = ("<script>document.querySelectorAll('table').forEach(t=>t.querySelectorAll('th').forEach((th,i)=>"
        "th.addEventListener('click',()=>{const body=t.tBodies[0],dir=th.dataset.dir==='asc'?'desc':'asc';"
        "t.querySelectorAll('th').forEach(h=>delete h.dataset.dir);th.dataset.dir=dir;"
        "const key=r=>{const s=r.cells[i].textContent.trim(),n=parseFloat(s.replace(/,/g,''));"
        "return isNaN(n)?s:n};const rows=[...body.rows].sort((a,b)=>{const x=key(a),y=key(b);"
        "const c=typeof x===typeof y?(x<y?-1:x>y?1:0):(typeof x==='number'?-1:1);return dir==='asc'?c:-c});"
        "rows.forEach(r=>body.appendChild(r))})))</script>")


def escape(text) -> str:
    return html.escape(str(text))


def table(head: list, rows: list[list], numeric=(), key=()) -> str:
    """A table; columns named in ``numeric`` align right, those in ``key`` are highlighted."""
    def cls(h):
        names = [n for n, on in (("num", h in numeric), ("key", h in key)) if on]
        return f" class='{' '.join(names)}'" if names else ""
    th = "".join(f"<th{' class=key' if h in key else ''}>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td{cls(h)}>{escape(x)}</td>" for h, x in zip(head, row)) + "</tr>"
                   for row in rows)
    return f"<div class='wide'><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>"


def image(png: bytes, alt: str) -> str:
    return f"<img alt='{escape(alt)}' src='data:image/png;base64,{base64.b64encode(png).decode()}'>"


def page(title: str, parts: list[str]) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(title)}</title><style>{STYLE}</style>"
            f"</head><body>{''.join(parts)}{SORT}</body></html>")

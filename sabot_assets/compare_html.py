"""`sabot compare --html`: the paired table as one static page (inline CSS, no script), rendered
by Jinja with autoescaping on, like the wave report (judges/report/html.py)."""

from jinja2 import Environment, StrictUndefined, select_autoescape

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>compare: {{ doc.before }} vs {{ doc.after }}</title>
<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:60em}table{border-collapse:collapse;margin:1em 0}
th,td{border:1px solid #bbb;padding:.3em .6em;text-align:right}th{background:#eee}td.l,th.l{text-align:left}
.fall{background:#fbe3e3}.rise{background:#e3f5e3}.label{font-weight:bold;color:#7b2d8e}</style></head><body>
<h1>Did detection change?</h1>
<p class="label">{{ doc.label }}</p>
<p>before: {{ doc.before }}<br>after: {{ doc.after }}</p>
<p>Detection ({{ doc.metric }}), paired on the cells both waves scored validly; exact McNemar, Holm across operators,
alpha {{ doc.alpha }} ({{ doc.alpha_source }}).</p>
<table id="contrasts"><tr><th class="l">operator</th><th>pairs</th><th>caught by both</th><th>before only</th><th>after only</th>
<th>before</th><th>after</th><th>exact p</th><th>Holm p</th><th class="l">reading</th></tr>
{% for c in rows %}<tr class="{{ c.direction if c.status == 'separated' else '' }}"><td class="l">{{ c.label }}</td><td>{{ c.n }}</td>
<td>{{ c.both }}</td><td>{{ c.before_only }}</td><td>{{ c.after_only }}</td><td>{{ pct(c.before_rate) }}</td><td>{{ pct(c.after_rate) }}</td>
<td>{{ '%.4g' % c.p }}</td><td>{{ '%.4g' % c.p_holm }}</td><td class="l">{{ c.status }}{{ ', ' + c.direction if c.n else '' }}</td></tr>
{% endfor %}</table>
<h2>Paired cells</h2>
<table id="cells"><tr><th class="l">operator</th><th>seed</th><th>before</th><th>after</th></tr>
{% for cell in doc.cells %}<tr class="{{ 'fall' if cell.before and not cell.after else 'rise' if cell.after and not cell.before else '' }}">
<td class="l">{{ cell.operator }}</td><td>{{ cell.seed }}</td><td>{{ 'caught' if cell.before else 'missed' }}</td>
<td>{{ 'caught' if cell.after else 'missed' }}</td></tr>
{% endfor %}</table>
<p>Valid on one side only (not paired): before {{ doc.unpaired['before only'] }}, after {{ doc.unpaired['after only'] }}.</p>
<h2>What changed in between</h2>
<pre>{% for line in doc.changes %}{{ line }}
{% else %}nothing the registration, the code or the stored runs record{% endfor %}</pre>
</body></html>
"""

_env = Environment(autoescape=select_autoescape(default=True, default_for_string=True), undefined=StrictUndefined)


def render(doc: dict) -> str:
    rows = [*doc["operators"].values(), doc["overall"]]
    return _env.from_string(PAGE).render(doc=doc, rows=rows, pct=lambda r: "n/a" if r != r else f"{100 * r:.1f}%")

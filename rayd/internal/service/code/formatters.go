package code

// pythonFormatters runs silently in every new Python kernel, after
// pythonSetup. It registers IPython display formatters that give rich
// results the shapes E2B's code interpreter gives them (its SDKs read
// them as Result.data, Result.chart and Result.json), written for rayd:
//
//   - "e2b/data": a pandas DataFrame as {column: [values]} (column names
//     as text; numpy scalars as numbers; dates, times and timestamps as
//     ISO 8601 text; NaN, NaT and NA as null; other values as text).
//   - "e2b/chart": a matplotlib Figure as a chart: {type, title,
//     elements} for each type, plus x_label, y_label, x_unit, y_unit
//     (the text in parentheses or brackets of the label) for 2-D charts,
//     plus x_ticks, x_tick_labels, x_scale, y_* (the major ticks in view;
//     scale linear, log, ..., datetime or categorical) for line and
//     scatter charts. Types: line (elements {label, points [[x, y]]}),
//     scatter (the same), bar ({label, group, value}; x_* name the
//     categories even for horizontal bars), pie ({label, angle, radius}),
//     box_and_whisker ({label, min, first_quartile, median,
//     third_quartile, max, outliers}), superchart (a figure of several
//     axes: {type, title (the suptitle), elements: charts}), unknown
//     (anything else: {type, title, elements: []}). A figure with no data
//     gets no chart; neither does one the extraction fails on (its image
//     remains).
//   - "application/json" for plain dicts and lists whose values are JSON
//     (numpy scalars and arrays included; NaN as null), with metadata
//     {"expanded": true}.
//
// Each of the three JSON formats is left out of a result when it would
// pass 4 MiB of JSON (or, before building it, a million values): a
// result is one event, and rayd's API refuses events over 8 MiB, which
// would end the cell's stream. The result keeps its other formats.
//
// The formatters match classes by name, so a kernel that never uses
// pandas or matplotlib never imports them. Each
// runs in the kernel as the user's code does; an error in one yields no
// value for that format, never an error of the cell.
const pythonFormatters = `def _rayito_formatters():
    import datetime, json, math, re, sys
    from IPython.core.formatters import BaseFormatter

    def module_of(v):
        return type(v).__module__.split('.')[0]

    def plain(v):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        pd = sys.modules.get('pandas')
        if pd is not None and (v is pd.NaT or v is getattr(pd, 'NA', None)):
            return None
        if isinstance(v, (datetime.date, datetime.time)):
            return v.isoformat()
        np = sys.modules.get('numpy')
        if np is not None:
            if isinstance(v, np.datetime64):
                return None if np.isnat(v) else str(v.astype('datetime64[s]'))
            if isinstance(v, np.timedelta64):
                return None if np.isnat(v) else str(v)
            if isinstance(v, np.generic):
                return plain(v.item())
        if pd is not None and isinstance(v, pd.Timedelta):
            return v.isoformat()
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        return str(v)

    class ByTypeName(BaseFormatter):
        # Printers by the full name of a class in the object's MRO: kept
        # apart from type_printers, which matplotlib's inline backend
        # empties of Figure in every formatter when pyplot loads.
        _return_type = (dict, list)

        def __init__(self, printers, **kwargs):
            super().__init__(**kwargs)
            self._rayito_printers = printers

        def __call__(self, obj):
            if self.enabled:
                for cls in type(obj).__mro__:
                    f = self._rayito_printers.get(cls.__module__ + '.' + cls.__qualname__)
                    if f is not None:
                        try:
                            r = f(obj)
                        except Exception:
                            return None
                        return r if isinstance(r, self._return_type) else None
            return super().__call__(obj)

    shell = get_ipython()
    display = shell.display_formatter
    max_values = 1000000
    max_bytes = 4 << 20

    def bounded(value):
        return value if len(json.dumps(value)) <= max_bytes else None

    def frame(df):
        rows, cols = df.shape
        if rows * max(cols, 1) > max_values:
            return None
        return bounded({str(name): [plain(v) for v in col.tolist()] for name, col in df.items()})

    display.formatters['e2b/data'] = ByTypeName({'pandas.core.frame.DataFrame': frame},
        parent=display, format_type='e2b/data', print_method='_repr_e2b_data_')

    def strict(v):
        if v is None or isinstance(v, (bool, str, int)):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        if isinstance(v, (list, tuple)):
            return [strict(x) for x in v]
        if isinstance(v, dict):
            return {key(k): strict(x) for k, x in v.items()}
        if module_of(v) == 'numpy' and hasattr(v, 'tolist'):
            return strict(v.tolist())
        raise TypeError('not JSON')

    def key(k):
        if isinstance(k, str):
            return k
        k = strict(k)
        if isinstance(k, (list, dict)):
            raise TypeError('not a JSON key')
        return json.dumps(k)

    def json_value(obj):
        try:
            value = bounded(strict(obj))
        except (TypeError, ValueError, RecursionError):
            return None
        if value is None:
            return None
        return value, {'expanded': True}

    js = display.formatters.get('application/json')
    if js is not None:
        js.for_type(dict, json_value)
        js.for_type(list, json_value)

    def text_or_none(s):
        return s if s else None

    unit_re = re.compile(r'(?:^|\s)(?:\(([^()]*)\)|\[([^\[\]]*)\])')

    def unit_of(label):
        m = unit_re.search(label or '')
        return (m.group(1) or m.group(2) or None) if m else None

    def rounded(v, digits=10):
        # Geometry read back from drawn paths carries float noise
        # (84.75000000000001 where the data said 84.75).
        v = float(v)
        return float('%.*g' % (digits, v)) if math.isfinite(v) else None

    def is_date_axis(axis):
        get = getattr(axis, 'get_converter', None)
        conv = get() if get else getattr(axis, 'converter', None)
        return conv is not None and type(conv).__module__ == 'matplotlib.dates'

    def scale_of(axis):
        if is_date_axis(axis):
            return 'datetime'
        units = axis.get_units()
        if units is not None and type(units).__module__ == 'matplotlib.category':
            return 'categorical'
        return axis.get_scale()

    def tick_pairs(axis):
        labels = [t.get_text() for t in axis.get_majorticklabels()]
        return list(zip(axis.get_majorticklocs(), labels))

    def ticks_of(axis):
        lo, hi = sorted(axis.get_view_interval())
        eps = (hi - lo) * 1e-9
        pairs = [(v, t) for v, t in tick_pairs(axis) if lo - eps <= v <= hi + eps]
        if is_date_axis(axis):
            from matplotlib.dates import num2date
            values = [num2date(v).isoformat() for v, _ in pairs]
        else:
            values = [float(v) for v, _ in pairs]
        return values, [t for _, t in pairs]

    def category_at(axis, pos):
        for v, text in tick_pairs(axis):
            if abs(v - pos) < 1e-9:
                return text
        return str(rounded(pos))

    def chart_base(ax, kind):
        return {'type': kind, 'title': text_or_none(ax.get_title()), 'elements': []}

    def chart_2d(ax, kind):
        c = chart_base(ax, kind)
        x, y = text_or_none(ax.get_xlabel()), text_or_none(ax.get_ylabel())
        c.update({'x_label': x, 'y_label': y, 'x_unit': unit_of(x), 'y_unit': unit_of(y)})
        return c

    def swap_xy(c):
        c['x_label'], c['y_label'] = c['y_label'], c['x_label']
        c['x_unit'], c['y_unit'] = c['y_unit'], c['x_unit']

    def chart_points(ax, kind):
        c = chart_2d(ax, kind)
        for name, axis in (('x', ax.xaxis), ('y', ax.yaxis)):
            values, labels = ticks_of(axis)
            c[name + '_ticks'], c[name + '_tick_labels'], c[name + '_scale'] = values, labels, scale_of(axis)
        return c

    def is_rule(line):
        # A straight horizontal or vertical segment (axhline, axvline).
        xs, ys = line.get_xdata(), line.get_ydata()
        return len(xs) == 2 and len(ys) == 2 and (xs[0] == xs[1] or ys[0] == ys[1])

    unnamed = re.compile(r'_child(\d+)$')

    budget = [0]

    def spend(n):
        budget[0] -= n
        if budget[0] < 0:
            raise OverflowError('too many points for a chart')

    def line_chart(ax):
        c = chart_points(ax, 'line')
        for line in ax.get_lines():
            if is_rule(line):
                continue
            spend(len(line.get_xdata()))
            label = line.get_label()
            m = unnamed.match(label)
            if m:
                label = 'Line ' + m.group(1)
            c['elements'].append({'label': label, 'points': [[plain(x), plain(y)] for x, y in zip(line.get_xdata(), line.get_ydata())]})
        return c

    def scatter_chart(ax):
        c = chart_points(ax, 'scatter')
        for coll in ax.collections:
            spend(len(coll.get_offsets()))
            c['elements'].append({'label': coll.get_label(), 'points': [[plain(x), plain(y)] for x, y in coll.get_offsets()]})
        return c

    def bar_chart(ax):
        c = chart_2d(ax, 'bar')
        horizontal = False
        for i, bars in enumerate(ax.containers):
            group = bars.get_label()
            if not group or group.startswith('_'):
                group = 'Group %d' % i
            horizontal = getattr(bars, 'orientation', None) == 'horizontal'
            values = getattr(bars, 'datavalues', None)
            for j, rect in enumerate(bars):
                if horizontal:
                    axis, pos, size = ax.yaxis, rect.get_y() + rect.get_height() / 2, rect.get_width()
                else:
                    axis, pos, size = ax.xaxis, rect.get_x() + rect.get_width() / 2, rect.get_height()
                value = values[j] if values is not None and j < len(values) else size
                c['elements'].append({'label': category_at(axis, pos), 'group': group, 'value': float(value)})
        if horizontal:
            swap_xy(c)
        return c

    def pie_chart(ax):
        c = chart_base(ax, 'pie')
        for w in ax.patches:
            # pie() computes its angles in float32: six digits are exact.
            c['elements'].append({'label': w.get_label(), 'angle': rounded(abs(w.theta2 - w.theta1), 6), 'radius': float(w.r)})
        return c

    def box_chart(ax):
        # Each box (a PathPatch) spans first to third quartile; the median
        # is the segment across it, the whiskers the segments from its
        # ends, the outliers the marker-only lines over it.
        c = chart_2d(ax, 'box_and_whisker')
        boxes = [p.get_path().get_extents() for p in ax.patches]
        segs = [(l.get_linestyle(), [float(v) for v in l.get_xdata()], [float(v) for v in l.get_ydata()]) for l in ax.lines]
        def near(a, b):
            return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
        def spans(vs, lo, hi):
            return len(vs) == 2 and near(min(vs), lo) and near(max(vs), hi)
        vertical = True
        if boxes:
            b = boxes[0]
            across_x = any(len(ys) == 2 and near(ys[0], ys[1]) and spans(xs, b.x0, b.x1) for _, xs, ys in segs)
            across_y = any(len(xs) == 2 and near(xs[0], xs[1]) and spans(ys, b.y0, b.y1) for _, xs, ys in segs)
            vertical = across_x or not across_y
        for b in boxes:
            p0, p1, q1, q3 = (b.x0, b.x1, b.y0, b.y1) if vertical else (b.y0, b.y1, b.x0, b.x1)
            lo, hi, median, outliers = q1, q3, (q1 + q3) / 2, []
            for style, xs, ys in segs:
                ps, vs = (xs, ys) if vertical else (ys, xs)
                if not ps or not all(p0 - 1e-9 <= p <= p1 + 1e-9 for p in ps):
                    continue
                if style in ('None', 'none', '', ' '):
                    outliers.extend(rounded(v) for v in vs)
                elif len(vs) == 2 and near(vs[0], vs[1]) and spans(ps, p0, p1) and q1 <= vs[0] <= q3:
                    median = vs[0]
                elif len(vs) == 2 and near(ps[0], ps[1]):
                    if near(max(vs), q1):
                        lo = min(vs)
                    elif near(min(vs), q3):
                        hi = max(vs)
            c['elements'].append({
                'label': category_at(ax.xaxis if vertical else ax.yaxis, (p0 + p1) / 2),
                'min': rounded(lo), 'first_quartile': rounded(q1), 'median': rounded(median),
                'third_quartile': rounded(q3), 'max': rounded(hi), 'outliers': outliers,
            })
        if not vertical:
            swap_xy(c)
        return c

    def kind_of(ax):
        from matplotlib import patches as mpatches
        from matplotlib.collections import PathCollection
        if ax.images or ax.tables or ax.artists:
            return 'unknown'
        lines, patches, colls = list(ax.lines), list(ax.patches), list(ax.collections)
        if lines and not patches and not colls:
            return 'line'
        if patches and not colls and all(isinstance(p, mpatches.PathPatch) for p in patches):
            return 'box_and_whisker'
        if any(not is_rule(l) for l in lines):
            return 'unknown'
        if colls and not patches and all(isinstance(x, PathCollection) for x in colls):
            return 'scatter'
        if patches and not colls and all(isinstance(p, mpatches.Wedge) for p in patches):
            return 'pie'
        if patches and not colls and ax.containers and all(type(p) is mpatches.Rectangle for p in patches):
            return 'bar'
        return 'unknown'

    builders = {'line': line_chart, 'scatter': scatter_chart, 'bar': bar_chart, 'pie': pie_chart, 'box_and_whisker': box_chart}

    def axes_chart(ax):
        kind = kind_of(ax)
        build = builders.get(kind)
        return build(ax) if build else chart_base(ax, kind)

    def figure_chart(fig):
        budget[0] = max_values
        try:
            axes = fig.get_axes()
            if not any(ax.has_data() for ax in axes):
                return None
            if len(axes) == 1:
                return bounded(axes_chart(axes[0]))
            get = getattr(fig, 'get_suptitle', None)
            sup = getattr(fig, '_suptitle', None)
            title = get() if get else (sup.get_text() if sup is not None else '')
            return bounded({'type': 'superchart', 'title': text_or_none(title), 'elements': [axes_chart(ax) for ax in axes]})
        except Exception:
            return None

    display.formatters['e2b/chart'] = ByTypeName({'matplotlib.figure.Figure': figure_chart},
        parent=display, format_type='e2b/chart', print_method='_repr_e2b_chart_')
try:
    _rayito_formatters()
except Exception:
    pass
del _rayito_formatters
`

"""Reports of results already recorded: terminal tables and the JSON document (terminal.py), the HTML page
and run comparison (html.py) with its plots (charts.py). The CI formats (JUnit, markdown) are the gate's."""

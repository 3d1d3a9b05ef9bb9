"""Static files of the live dashboard (index.html, app.js, chart.js, style.css), served as-is."""

//! Tables written as CSV or Parquet, chosen by the file's extension (`.csv`, `.parquet`): the backtest's
//! equity and trade exports. CSV fields are written with full precision (Rust's shortest round-trip form
//! for floats) and quoted where they hold a comma or a quote; Parquet columns are UTF-8 strings, INT64 or
//! DOUBLE, required, in one row group.

use crate::Error;
use std::path::Path;
use std::sync::Arc;

/// One column's values.
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    /// Text (timestamps, names, reasons).
    Text(Vec<String>),
    /// Integers (bars).
    Int(Vec<i64>),
    /// Floats (prices, money, returns).
    Float(Vec<f64>),
}

impl Column {
    /// Rows.
    pub fn len(&self) -> usize {
        match self {
            Self::Text(v) => v.len(),
            Self::Int(v) => v.len(),
            Self::Float(v) => v.len(),
        }
    }

    /// Whether the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn cell(&self, i: usize) -> String {
        match self {
            Self::Text(v) if v[i].contains([',', '"', '\n']) => format!("\"{}\"", v[i].replace('"', "\"\"")),
            Self::Text(v) => v[i].clone(),
            Self::Int(v) => v[i].to_string(),
            Self::Float(v) => v[i].to_string(),
        }
    }
}

/// Writes `columns` (name, values; all the same length) to `path` as CSV or Parquet by its extension.
pub fn write_table(path: &Path, columns: &[(String, Column)]) -> Result<(), Error> {
    let rows = columns.first().map_or(0, |c| c.1.len());
    if let Some((name, _)) = columns.iter().find(|c| c.1.len() != rows) {
        return Err(Error::Output(format!("writing {}: column {name} has another length", path.display())));
    }
    match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("csv") => std::fs::write(path, csv_text(columns)).map_err(Error::io(path)),
        Some("parquet") => {
            write_parquet(path, columns).map_err(|e| Error::Output(format!("writing {}: {e}", path.display())))
        }
        _ => Err(Error::Output(format!("{}: the file must end in .csv or .parquet", path.display()))),
    }
}

/// `columns` (all the same length) as CSV text: a header of the names, then a line per row.
pub fn csv_text(columns: &[(String, Column)]) -> String {
    let rows = columns.first().map_or(0, |c| c.1.len());
    let names: Vec<&str> = columns.iter().map(|c| c.0.as_str()).collect();
    let mut out = names.join(",") + "\n";
    for i in 0..rows {
        let cells: Vec<String> = columns.iter().map(|c| c.1.cell(i)).collect();
        out += &cells.join(",");
        out.push('\n');
    }
    out
}

fn write_parquet(path: &Path, columns: &[(String, Column)]) -> parquet::errors::Result<()> {
    use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
    use parquet::file::writer::SerializedFileWriter;
    let fields: Vec<String> = columns
        .iter()
        .map(|(name, c)| match c {
            Column::Text(_) => format!("REQUIRED BYTE_ARRAY {name} (UTF8);"),
            Column::Int(_) => format!("REQUIRED INT64 {name};"),
            Column::Float(_) => format!("REQUIRED DOUBLE {name};"),
        })
        .collect();
    let schema =
        Arc::new(parquet::schema::parser::parse_message_type(&format!("message table {{ {} }}", fields.join(" ")))?);
    let file = std::fs::File::create(path)?;
    let mut writer = SerializedFileWriter::new(file, schema, Default::default())?;
    let mut group = writer.next_row_group()?;
    for (_, values) in columns {
        let Some(mut column) = group.next_column()? else { break };
        match values {
            Column::Text(v) => {
                let v: Vec<ByteArray> = v.iter().map(|s| ByteArray::from(s.as_str())).collect();
                column.typed::<ByteArrayType>().write_batch(&v, None, None)?;
            }
            Column::Int(v) => {
                column.typed::<Int64Type>().write_batch(v, None, None)?;
            }
            Column::Float(v) => {
                column.typed::<DoubleType>().write_batch(v, None, None)?;
            }
        }
        column.close()?;
    }
    group.close()?;
    writer.close()?;
    Ok(())
}

/// A trade ledger as table columns, the layout of every trades export (`tradesim backtest --trades`, the
/// hyperopt report's `best-trades.csv`): `column` (the name of each trade's column), entry and exit time
/// (`time(bar)`) and bar, side, units, fill prices (spread included), costs, PnL, return (PnL over the
/// equity at entry) and exit reason.
pub fn trade_columns(trades: &[(String, crate::Trade)], time: &dyn Fn(u32) -> String) -> Vec<(String, Column)> {
    let text = |f: &dyn Fn(&(String, crate::Trade)) -> String| Column::Text(trades.iter().map(f).collect());
    let int = |f: &dyn Fn(&crate::Trade) -> i64| Column::Int(trades.iter().map(|(_, t)| f(t)).collect());
    let float = |f: &dyn Fn(&crate::Trade) -> f64| Column::Float(trades.iter().map(|(_, t)| f(t)).collect());
    vec![
        ("column".to_owned(), text(&|(name, _)| name.clone())),
        ("entry_time".to_owned(), text(&|(_, t)| time(t.entry_bar))),
        ("entry_bar".to_owned(), int(&|t| i64::from(t.entry_bar))),
        ("exit_time".to_owned(), text(&|(_, t)| time(t.exit_bar))),
        ("exit_bar".to_owned(), int(&|t| i64::from(t.exit_bar))),
        ("side".to_owned(), text(&|(_, t)| if t.side > 0 { "long" } else { "short" }.to_owned())),
        ("units".to_owned(), float(&|t| t.units.abs())),
        ("entry_price".to_owned(), float(&|t| t.entry_price)),
        ("exit_price".to_owned(), float(&|t| t.exit_price)),
        ("costs".to_owned(), float(&|t| t.costs)),
        ("pnl".to_owned(), float(&|t| t.pnl)),
        ("return".to_owned(), float(&|t| t.ret)),
        ("exit_reason".to_owned(), text(&|(_, t)| format!("{:?}", crate::ExitReason::from_code(t.reason)))),
    ]
}

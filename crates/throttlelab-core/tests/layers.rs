//! The core's layer rule (docs/engine.md): `src/vocab` imports nothing of the
//! crate's other layers, `src/format` imports the vocabulary only, and
//! `src/engine` imports both. Read from every file's `crate::` paths outside
//! its tests; a path must name its layer (`crate::vocab::types::Time`), not a
//! root re-export, so that the rule can be read off it.

use std::path::Path;

const LAYERS: [&str; 3] = ["vocab", "format", "engine"];

/// The upward or unnamed-layer paths in one file of layer `own`, as
/// (line number, path).
fn violations(own: &str, source: &str) -> Vec<(usize, String)> {
    let rank = |layer: &str| LAYERS.iter().position(|l| *l == layer);
    let own_rank = rank(own).expect("a layer");
    let mut found = Vec::new();
    for (n, line) in source.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        if line.trim_start().starts_with("//") {
            continue;
        }
        for (at, _) in line.match_indices("crate::") {
            let rest = &line[at + "crate::".len()..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !matches!(rank(&name), Some(r) if r <= own_rank) {
                found.push((n + 1, line[at..].split([';', ' ', ',', '(']).next().unwrap_or("").to_string()));
            }
        }
    }
    found
}

#[test]
fn no_layer_imports_a_layer_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut bad = Vec::new();
    let mut files = 0;
    for layer in LAYERS {
        for entry in std::fs::read_dir(src.join(layer)).expect("the layer's folder") {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_some_and(|e| e == "rs") {
                files += 1;
                let text = std::fs::read_to_string(&path).expect("readable");
                for (line, import) in violations(layer, &text) {
                    bad.push(format!("{}:{line}: {import}", path.strip_prefix(&src).unwrap().display()));
                }
            }
        }
    }
    assert!(files > 20, "only {files} files found under src/{{vocab,format,engine}}");
    assert!(bad.is_empty(), "imports against the layer rule (vocab < format < engine):\n{}", bad.join("\n"));
    // lib.rs holds the layers and nothing else: no code of its own beyond
    // the three entry points, which may use every layer.
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    for module in ["mod vocab;", "mod format;", "mod engine;"] {
        assert!(lib.contains(module), "lib.rs declares {module}");
    }
}

#[test]
fn the_rule_catches_an_upward_import() {
    let format_file = "use crate::vocab::phase::Phase;\nuse crate::engine::sim::Sim;\n#[cfg(test)]\nuse crate::engine::fair;\n";
    assert_eq!(violations("format", format_file), vec![(2, "crate::engine::sim::Sim".to_string())]);
    assert_eq!(violations("vocab", "use crate::format::scenario::Scenario;"), vec![(1, "crate::format::scenario::Scenario".to_string())]);
    // A root re-export hides the layer: refused too.
    assert_eq!(violations("engine", "use crate::scenario::TaskSpec;"), vec![(1, "crate::scenario::TaskSpec".to_string())]);
    assert!(violations("engine", "use crate::format::scenario::TaskSpec;\nuse crate::vocab::types::Time;").is_empty());
}

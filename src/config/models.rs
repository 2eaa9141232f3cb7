//! `models.providers.<provider>.models[]`: the model catalog, how a model ref resolves against
//! it, and what a model costs. Reads only its own section of the config; never refuses a model
//! a caller picks (that is the caller's job).

use super::read::{invalid, Section};
use crate::error::Result;
use crate::keys::js_trim;

/// Per-million-token prices of a model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelCost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CatalogModel {
    pub id: String,
    pub cost: Option<ModelCost>,
}

/// `models.providers.<provider>.models[]`, in config order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelCatalog {
    pub providers: Vec<(String, Vec<CatalogModel>)>,
}

/// A model reference resolved against the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRef {
    /// None only when no catalog is configured and the ref had no `provider/` part
    pub provider: Option<String>,
    pub model: String,
}

impl ModelCatalog {
    /// No provider lists any model.
    pub fn is_empty(&self) -> bool {
        self.providers.iter().all(|(_, models)| models.is_empty())
    }
    /// API.md §1.1: `provider/id` is valid when listed under that provider; a bare `id` when
    /// listed under some provider (the first in config order wins); with an empty
    /// catalog every non-empty ref is valid (`provider/id` split at the first `/`). None =
    /// invalid. The ref is trimmed first. A `provider/id` whose provider does not list it is
    /// also tried as a bare id (model ids may contain `/`, e.g. `meta-llama/Llama-3`). Provider
    /// names match case-insensitively, model ids exactly.
    pub fn resolve(&self, model_ref: &str) -> Option<ModelRef> {
        let model_ref = js_trim(model_ref);
        if model_ref.is_empty() {
            return None;
        }
        let split = model_ref
            .split_once('/')
            .map(|(p, m)| (js_trim(p), js_trim(m)))
            .filter(|(p, m)| !p.is_empty() && !m.is_empty());
        if self.is_empty() {
            return Some(match split {
                Some((p, m)) => ModelRef { provider: Some(p.to_string()), model: m.to_string() },
                None => ModelRef { provider: None, model: model_ref.to_string() },
            });
        }
        let listed = |provider: &str, model: &str| {
            self.provider(provider)
                .filter(|(_, models)| models.iter().any(|m| m.id == model))
                .map(|(name, _)| ModelRef { provider: Some(name.clone()), model: model.to_string() })
        };
        if let Some(found) = split.and_then(|(p, m)| listed(p, m)) {
            return Some(found);
        }
        self.providers
            .iter()
            .find(|(_, models)| models.iter().any(|m| m.id == model_ref))
            .map(|(name, _)| ModelRef { provider: Some(name.clone()), model: model_ref.to_string() })
    }

    pub fn cost(&self, provider: &str, model: &str) -> Option<&ModelCost> {
        self.provider(provider)?.1.iter().find(|m| m.id == model)?.cost.as_ref()
    }

    /// The first provider of this name (trimmed, case-insensitive).
    fn provider(&self, provider: &str) -> Option<&(String, Vec<CatalogModel>)> {
        let wanted = js_trim(provider).to_lowercase();
        self.providers.iter().find(|(name, _)| name.to_lowercase() == wanted)
    }
}

pub(super) fn read_catalog(providers: &Section<'_>) -> Result<ModelCatalog> {
    let mut catalog = ModelCatalog::default();
    for (name, value, path) in providers.entries_here() {
        let provider = Section::at(Some(value), path)?;
        let models = provider
            .array("models")?
            .iter()
            .enumerate()
            .map(|(i, model)| {
                let model = Section::at(Some(model), format!("{}[{i}]", provider.path_of("models")))?;
                if model.map.is_none() {
                    return Err(invalid(&model.path, "must be an object"));
                }
                let id = model.trimmed("id")?.ok_or_else(|| model.bad("id", "must be a non-empty string"))?;
                let cost = model.section("cost")?;
                let cost = match cost.map {
                    None => None,
                    Some(_) => Some(ModelCost {
                        input: cost.number("input")?.unwrap_or(0.0),
                        output: cost.number("output")?.unwrap_or(0.0),
                        cache_read: cost.number("cacheRead")?.unwrap_or(0.0),
                        cache_write: cost.number("cacheWrite")?.unwrap_or(0.0),
                    }),
                };
                Ok(CatalogModel { id, cost })
            })
            .collect::<Result<Vec<_>>>()?;
        catalog.providers.push((name.clone(), models));
    }
    Ok(catalog)
}

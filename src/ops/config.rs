//! The project's configuration and product variant, read and written through the handle.

use serde_json::Value;

use crate::config::{ConfigResult, ProductVariant, ProjectConfig, META_CONFIG, META_VARIANT};
use crate::error::{Error, Result};
use crate::memory::Memory;

impl Memory {
    /// The project's extraction configuration (empty until set).
    #[tracing::instrument(name = "config", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn config(&self) -> Result<ProjectConfig> {
        match self.inner.store.meta(META_CONFIG).await? {
            None => Ok(ProjectConfig::default()),
            Some(json) => serde_json::from_str(&json).map_err(|e| {
                Error::internal(format!(
                    "the stored project configuration is unreadable: {e}"
                ))
            }),
        }
    }

    /// Replaces the project's extraction configuration (400 if it breaks a rule).
    #[tracing::instrument(name = "set_config", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn set_config(&self, config: ProjectConfig) -> Result<ConfigResult> {
        config.validate()?;
        let json = serde_json::to_string(&config)
            .map_err(|e| Error::internal(format!("configuration does not serialise: {e}")))?;
        let write = crate::store::Write::Meta {
            key: META_CONFIG.to_string(),
            value: json,
            log: true,
            at: crate::record::now(),
        };
        let outcome = self
            .commit(crate::store::WriteBatch::new(vec![write], 0))
            .await?;
        Ok(ConfigResult {
            config,
            credits_used: 0,
            credits_remaining: outcome.credits_remaining,
        })
    }

    /// Applies the spec's PUT body to the configuration (see
    /// [`ProjectConfig::merged_with_json`]): absent fields are kept, anything malformed is a
    /// 400 and changes nothing.
    #[tracing::instrument(name = "put_config", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn put_config(&self, body: &Value) -> Result<ConfigResult> {
        // Read and write under the configuration lock, so that two partial updates through
        // this handle do not lose each other's field.
        let _lock = self.inner.config_lock.lock().await;
        let next = self.config().await?.merged_with_json(body)?;
        self.set_config(next).await
    }

    /// The project's product variant.
    #[tracing::instrument(name = "product_variant", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn product_variant(&self) -> Result<ProductVariant> {
        match self.inner.store.meta(META_VARIANT).await? {
            None => Ok(ProductVariant::default()),
            Some(v) => serde_json::from_value(Value::String(v.clone())).map_err(|_| {
                Error::internal(format!("the stored product variant {v:?} is unknown"))
            }),
        }
    }

    /// Sets the project's product variant (an operator's decision, not a tenant's).
    #[tracing::instrument(name = "set_product_variant", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn set_product_variant(&self, variant: ProductVariant) -> Result<()> {
        let name = match serde_json::to_value(variant) {
            Ok(Value::String(s)) => s,
            _ => return Err(Error::internal("product variant does not serialise")),
        };
        crate::memory::set_meta(&*self.inner.store, META_VARIANT, &name).await
    }
}

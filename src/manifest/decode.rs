//! Declarative decoding of an evaluated block's attributes into a typed struct, as hcl-rs and
//! serde decode a body: `#[derive(Deserialize)] struct VmAttrs { size: Option<Located<String>>,
//! ... }` and one [`decode`] call.
//!
//! The decoder is a small serde `Deserializer` whose map walks the block's evaluated attributes,
//! so it always knows which attribute it is on: a type error becomes a located diagnostic with the
//! manifest's own wording ("`count` in vm \"gpu\" must be a whole number", labelled "this is a
//! string"), a missing required field becomes "vm \"gpu\" is missing `size`" with the struct's
//! example, and [`Located`] picks up the attribute's span. HCL's conversions are kept: a number is
//! accepted where text is expected (`zone = 1`), a numeric string where a whole number is, and a
//! single string where a list of strings is.
//!
//! One mistake gives one error: an attribute whose evaluation already failed (or that is `null`)
//! is not visited at all, so a required one stays silent, and an attribute the decoder rejected is
//! dropped and the struct decoded again without it, so every field's problem is reported, each
//! once, and the others still decode (an `Option` field is then `None`).

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::StrDeserializer;
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess,
    Visitor,
};
use serde::{Deserialize, forward_to_deserialize_any};
use serde_json::Value as Json;

use crate::diag::{Diagnostic, Span, did_you_mean};

use super::eval::{EvalAttr, EvalBlock, type_name};

/// A value with the span it was written at.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Located<T> {
    /// The value.
    pub value: T,
    /// Where it was written.
    pub span: Span,
}

/// A block's attributes as a typed struct.
pub(super) trait BlockAttrs: DeserializeOwned {
    /// The required attributes, each with an example value for the help of the error that
    /// reports it missing ("vm \"gpu\" is missing `size`", "add `size = ...`"). Every field that
    /// is not an `Option` must be listed; an `Option` field may be listed too, when the block's
    /// other checks should still run without it (the struct then decodes, with `None` there).
    const REQUIRED: &'static [(&'static str, &'static str)] = &[];
}

/// What the decoder does with an attribute the struct has no field for.
#[derive(Debug, Clone, Copy)]
pub(super) enum Unknown<'a> {
    /// Skip it: `schema.rs` checked every resource block's attribute names before evaluation and
    /// reported the unknown ones, so a second report here would repeat it.
    Checked,
    /// Report it as an unknown parameter of a step kind (step parameters depend on the kind, so
    /// the schema leaves them to the expansion). `allowed` are every name the kind takes, which
    /// may be more than the struct's fields (the kind's own parameters are read one by one).
    Param {
        /// The step kind, as the messages name it.
        kind: &'a str,
        /// Every attribute the kind takes.
        allowed: &'a [&'a str],
    },
}

/// Decode `block`'s attributes into `T`, reporting each problem into `diags`: every rejected
/// value, then every required attribute that is not written. `None` when a non-`Option` field
/// has no value (missing, or written and rejected).
pub(super) fn decode<T: BlockAttrs>(
    block: &EvalBlock,
    unknown: Unknown<'_>,
    diags: &mut Vec<Diagnostic>,
) -> Option<T> {
    let title = block.title();
    let mut dropped = BTreeSet::new();
    let decoded = loop {
        let de = BlockDeserializer {
            block,
            title: &title,
            unknown,
            dropped: &dropped,
        };
        match T::deserialize(de) {
            Ok(value) => break Some(value),
            Err(Error::Rejected(index, diagnostic)) => {
                diags.push(*diagnostic);
                // Each retry drops one more attribute, so this ends.
                dropped.insert(index);
            }
            Err(Error::Missing(name)) => {
                debug_assert!(
                    T::REQUIRED.iter().any(|(field, _)| *field == name),
                    "`{name}` is required but has no example in REQUIRED"
                );
                break None;
            }
            Err(Error::Type(expected)) => {
                // Attribute values' errors are caught as `Rejected`; this is a struct the
                // decoder cannot fill at all, a programming error.
                debug_assert!(false, "{title} cannot decode: {expected}");
                break None;
            }
        }
    };
    // Written but failed or null: already reported, or meant as "unset"; either way not missing.
    for (name, example) in T::REQUIRED {
        if block.attr(name).is_none() {
            diags.push(missing(block, name, example));
        }
    }
    decoded
}

/// Decode one attribute of `block` into `T`: for attributes whose type comes from a table (step
/// parameters). `None` if it is not written, failed to evaluate, is null, or was rejected.
pub(super) fn attr<T: DeserializeOwned>(
    block: &EvalBlock,
    name: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<T> {
    let (index, attr) = block
        .attrs
        .iter()
        .enumerate()
        .find(|(_, a)| a.name == name)?;
    let value = visible(attr)?;
    let title = block.title();
    let ctx = AttrContext {
        attr,
        index,
        title: &title,
    };
    match T::deserialize(ctx.root(value)).map_err(|e| ctx.reject(e, value)) {
        Ok(value) => Some(value),
        Err(Error::Rejected(_, diagnostic)) => {
            diags.push(*diagnostic);
            None
        }
        Err(_) => None,
    }
}

/// "vm \"gpu\" is missing `size`": the error of a required attribute that is not written.
pub(super) fn missing(block: &EvalBlock, name: &str, example: &str) -> Diagnostic {
    Diagnostic::error(format!("{} is missing `{name}`", block.title()))
        .with_span(block.header.clone())
        .with_help(format!("add `{name} = {example}`"))
}

/// "`size` in vm \"gpu\" must be text": the error of a value of the wrong type.
fn type_error(attr: &EvalAttr, title: &str, expected: &str, found: &Json) -> Diagnostic {
    Diagnostic::error(format!("`{}` in {title} must be {expected}", attr.name))
        .with_span(attr.value_span.clone())
        .with_label(format!("this is {}", type_name(found)))
}

/// An attribute's value when the decoder should look at it: written, evaluated and not null.
fn visible(attr: &EvalAttr) -> Option<&Json> {
    attr.value.as_ref().filter(|v| !v.is_null())
}

/// Why decoding stopped.
#[derive(Debug)]
enum Error {
    /// The attribute at this index was rejected with this diagnostic.
    Rejected(usize, Box<Diagnostic>),
    /// A required field is not written.
    Missing(&'static str),
    /// A value is not what the field's type expects (described as messages do: "text").
    Type(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rejected(_, d) => write!(f, "{}", d.summary),
            Self::Missing(name) => write!(f, "missing `{name}`"),
            Self::Type(expected) => write!(f, "expected {expected}"),
        }
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self::Type(msg.to_string())
    }

    fn missing_field(field: &'static str) -> Self {
        Self::Missing(field)
    }
}

/// Deserializes a whole block as a map of its attributes.
struct BlockDeserializer<'a> {
    block: &'a EvalBlock,
    title: &'a str,
    unknown: Unknown<'a>,
    dropped: &'a BTreeSet<usize>,
}

impl<'de> Deserializer<'de> for BlockDeserializer<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_struct("", &[], visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_map(AttrsAccess {
            de: self,
            fields,
            next: 0,
            current: None,
        })
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// Walks a block's attributes in source order.
struct AttrsAccess<'a> {
    de: BlockDeserializer<'a>,
    fields: &'static [&'static str],
    next: usize,
    /// The attribute whose key was handed out last.
    current: Option<(usize, &'a EvalAttr, &'a Json)>,
}

impl AttrsAccess<'_> {
    fn unknown_param(&self, attr: &EvalAttr, kind: &str, allowed: &[&str]) -> Diagnostic {
        let _ = self;
        let d = Diagnostic::error(format!(
            "unknown parameter `{}` for step \"{kind}\"",
            attr.name
        ))
        .with_span(attr.key_span.clone())
        .with_label(format!("`{kind}` does not take this"));
        match did_you_mean(&attr.name, allowed.iter().copied()) {
            Some(s) => d.with_help(format!("did you mean `{s}`?")),
            None => d.with_help(format!("`{kind}` takes: {}", allowed.join(", "))),
        }
    }
}

impl<'de> MapAccess<'de> for AttrsAccess<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        while let Some(attr) = self.de.block.attrs.get(self.next) {
            let index = self.next;
            self.next += 1;
            if self.de.dropped.contains(&index) {
                continue;
            }
            if !self.fields.contains(&attr.name.as_str()) {
                if let Unknown::Param { kind, allowed } = self.de.unknown
                    && !allowed.contains(&attr.name.as_str())
                {
                    let d = self.unknown_param(attr, kind, allowed);
                    return Err(Error::Rejected(index, Box::new(d)));
                }
                continue;
            }
            let Some(value) = visible(attr) else {
                continue;
            };
            self.current = Some((index, attr, value));
            let key: StrDeserializer<'_, Error> = attr.name.as_str().into_deserializer();
            return seed.deserialize(key).map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Error> {
        let Some((index, attr, value)) = self.current.take() else {
            return Err(Error::Type("a value after its key".into()));
        };
        let ctx = AttrContext {
            attr,
            index,
            title: self.de.title,
        };
        seed.deserialize(ctx.root(value))
            .map_err(|e| ctx.reject(e, value))
    }
}

/// The attribute a value belongs to, for the messages about it.
#[derive(Clone, Copy)]
struct AttrContext<'a> {
    attr: &'a EvalAttr,
    index: usize,
    title: &'a str,
}

impl<'a> AttrContext<'a> {
    fn root(self, value: &'a Json) -> ValueDeserializer<'a> {
        ValueDeserializer {
            ctx: self,
            value,
            at: Position::Attr,
        }
    }

    /// Turn a value's error into the attribute's diagnostic.
    fn reject(self, error: Error, value: &Json) -> Error {
        match error {
            Error::Type(expected) => Error::Rejected(
                self.index,
                Box::new(type_error(self.attr, self.title, &expected, value)),
            ),
            other => other,
        }
    }
}

/// Where a value sits in its attribute: HCL converts differently in each place, and the checks
/// this decoder replaces did the same.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Position {
    /// The attribute's whole value: text accepts a number.
    Attr,
    /// An item of a list: only text is text.
    Item,
    /// A value of a map: a number or a bool reads as text.
    MapValue,
}

/// Deserializes one value of an attribute.
struct ValueDeserializer<'a> {
    ctx: AttrContext<'a>,
    value: &'a Json,
    at: Position,
}

/// Magic struct names through which [`Located`] and [`Ref`] ask for what only the decoder knows
/// (toml's `Spanned` does the same).
const LOCATED: &str = "$dsinfra::Located";
const REF: &str = "$dsinfra::Ref";

thread_local! {
    /// The span of the value a [`Located`] is being decoded from. serde gives a `Deserialize`
    /// impl no way to reach its deserializer's data, and a span holds its file, which cannot pass
    /// through serde's data model as toml's byte offsets do; the decoder sets it right before it
    /// hands the value to `Located`'s visitor, on the same thread.
    static LOCATED_SPAN: RefCell<Option<Span>> = const { RefCell::new(None) };
}

/// How an expectation reads for the items of a list or the values of a map.
fn plural(expected: &str) -> String {
    match expected {
        "text" => "text values".into(),
        "a whole number" => "whole numbers".into(),
        other => format!("{other} values"),
    }
}

impl ValueDeserializer<'_> {
    fn integer(&self) -> Option<i64> {
        match self.value {
            Json::Number(n) => n.as_i64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                    // The filter above makes the cast exact.
                    .map(|f| {
                        #[allow(clippy::cast_possible_truncation)]
                        let i = f as i64;
                        i
                    })
            }),
            Json::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    fn text(&self) -> Option<String> {
        match (self.value, self.at) {
            (Json::String(s), _) => Some(s.clone()),
            (Json::Number(n), Position::Attr | Position::MapValue) => Some(n.to_string()),
            (Json::Bool(b), Position::MapValue) => Some(b.to_string()),
            _ => None,
        }
    }

    fn one_of(&self, text: &str, allowed: &[&str]) -> Error {
        let ctx = self.ctx;
        let mut d = Diagnostic::error(format!(
            "`{}` in {} must be one of: {}",
            ctx.attr.name,
            ctx.title,
            allowed.join(", ")
        ))
        .with_span(ctx.attr.value_span.clone())
        .with_label(format!("`{text}` is not one of them"));
        if let Some(s) = did_you_mean(text, allowed.iter().copied()) {
            d = d.with_help(format!("did you mean `{s}`?"));
        }
        Error::Rejected(ctx.index, Box::new(d))
    }

    fn reference(&self, what: &str, example: &str, refused: Option<&str>) -> Error {
        let ctx = self.ctx;
        let name = &ctx.attr.name;
        let found = match refused {
            Some(other) => format!("this refers to `{other}`"),
            None => format!("this is {}", type_name(self.value)),
        };
        let d = Diagnostic::error(format!("`{name}` in {} must refer to {what}", ctx.title))
            .with_span(ctx.attr.value_span.clone())
            .with_label(found)
            .with_help(format!(
                "write a reference without quotes, e.g. `{name} = {example}`"
            ));
        Error::Rejected(ctx.index, Box::new(d))
    }
}

impl<'de> Deserializer<'de> for ValueDeserializer<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Json::Null => visitor.visit_unit(),
            Json::Bool(b) => visitor.visit_bool(*b),
            Json::Number(_) => match self.integer() {
                Some(i) => visitor.visit_i64(i),
                None => visitor.visit_f64(self.value.as_f64().unwrap_or_default()),
            },
            Json::String(s) => visitor.visit_str(s),
            Json::Array(_) => self.deserialize_seq(visitor),
            Json::Object(_) => self.deserialize_map(visitor),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Json::Bool(b) => visitor.visit_bool(*b),
            _ => Err(Error::Type("true or false".into())),
        }
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.integer() {
            Some(i) => visitor.visit_i64(i),
            None => Err(Error::Type("a whole number".into())),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.text() {
            Some(s) => visitor.visit_string(s),
            None => Err(Error::Type("text".into())),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.value.is_null() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let items: Vec<&Json> = match (self.value, self.at) {
            (Json::Array(items), Position::Attr) => items.iter().collect(),
            // HCL reads a single value where a list is expected as a list of one; anything that
            // is not a valid item fails as one, with the list's expectation in the message.
            (other, Position::Attr) => vec![other],
            _ => return Err(Error::Type("a list".into())),
        };
        visitor
            .visit_seq(Items {
                ctx: self.ctx,
                items: items.into_iter(),
            })
            .map_err(|e| match e {
                Error::Type(expected) => Error::Type(format!("a list of {}", plural(&expected))),
                other => other,
            })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let Json::Object(map) = self.value else {
            return Err(Error::Type("a map of text values".into()));
        };
        visitor
            .visit_map(Entries {
                ctx: self.ctx,
                iter: map.iter(),
                value: None,
            })
            .map_err(|e| match e {
                Error::Type(expected) => Error::Type(format!("a map of {}", plural(&expected))),
                other => other,
            })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        if name == LOCATED {
            let span = self.ctx.attr.value_span.clone();
            LOCATED_SPAN.with(|s| *s.borrow_mut() = Some(span));
            return visitor.visit_map(LocatedAccess {
                value: Some(self),
                span_given: false,
            });
        }
        if name == REF {
            let [what, example] = fields else {
                return Err(Error::Type("a reference".into()));
            };
            let address = self.value.get("address").and_then(Json::as_str);
            let Some(address) = address else {
                return Err(self.reference(what, example, None));
            };
            return visitor
                .visit_str::<Error>(address)
                .map_err(|_| self.reference(what, example, Some(address)));
        }
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let Some(text) = self.text() else {
            return Err(Error::Type("text".into()));
        };
        if !variants.contains(&text.as_str()) {
            return Err(self.one_of(&text, variants));
        }
        visitor.visit_enum(text.into_deserializer())
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        i8 i16 i32 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf unit unit_struct
        newtype_struct tuple tuple_struct identifier
    }
}

/// The items of a list attribute.
struct Items<'a, I> {
    ctx: AttrContext<'a>,
    items: I,
}

impl<'de, 'a, I: Iterator<Item = &'a Json>> SeqAccess<'de> for Items<'a, I> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let Some(value) = self.items.next() else {
            return Ok(None);
        };
        seed.deserialize(ValueDeserializer {
            ctx: self.ctx,
            value,
            at: Position::Item,
        })
        .map(Some)
    }
}

/// The entries of a map attribute.
struct Entries<'a, I> {
    ctx: AttrContext<'a>,
    iter: I,
    value: Option<&'a Json>,
}

impl<'de, 'a, I: Iterator<Item = (&'a String, &'a Json)>> MapAccess<'de> for Entries<'a, I> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.iter.next() else {
            return Ok(None);
        };
        self.value = Some(value);
        let key: StrDeserializer<'_, Error> = key.as_str().into_deserializer();
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Error> {
        let value = self.value.take().unwrap_or(&Json::Null);
        seed.deserialize(ValueDeserializer {
            ctx: self.ctx,
            value,
            at: Position::MapValue,
        })
    }
}

/// Hands [`Located`]'s visitor the value, then a marker that the span is waiting.
struct LocatedAccess<'a> {
    value: Option<ValueDeserializer<'a>>,
    span_given: bool,
}

impl<'de> MapAccess<'de> for LocatedAccess<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let key = if self.value.is_some() {
            "value"
        } else if !self.span_given {
            self.span_given = true;
            "span"
        } else {
            return Ok(None);
        };
        let key: StrDeserializer<'_, Error> = key.into_deserializer();
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(value),
            None => seed.deserialize(().into_deserializer()),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Located<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LocatedVisitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for LocatedVisitor<T> {
            type Value = Located<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a manifest attribute's value")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Located<T>, A::Error> {
                // Taken first: `T` may hold a `Located` of its own, which sets it again.
                let span = LOCATED_SPAN
                    .with(|s| s.borrow_mut().take())
                    .ok_or_else(|| de::Error::custom("Located outside a manifest decoder"))?;
                let mut value = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key == "value" {
                        value = Some(map.next_value::<T>()?);
                    } else {
                        map.next_value::<()>()?;
                    }
                }
                let value = value.ok_or_else(|| de::Error::missing_field("value"))?;
                Ok(Located { value, span })
            }
        }

        deserializer.deserialize_struct(LOCATED, &["value", "span"], LocatedVisitor(PhantomData))
    }
}

/// The texts a [`OneOf`] allows (ARM's enums are case-sensitive, and so are these).
pub(super) trait Choices {
    /// Every allowed text, in the order the error lists them.
    const ALLOWED: &'static [&'static str];
}

/// Text that must be one of `C::ALLOWED`, with its span; anything else is reported as "`sku` in
/// ... must be one of: ..." with a "did you mean". A serde enum does the same where the code
/// wants variants rather than the text.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct OneOf<C> {
    /// The text.
    pub value: String,
    /// Where it was written.
    pub span: Span,
    choices: PhantomData<C>,
}

impl<'de, C: Choices> Deserialize<'de> for OneOf<C> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let located = Located::<Choice<C>>::deserialize(deserializer)?;
        Ok(Self {
            value: located.value.0,
            span: located.span,
            choices: PhantomData,
        })
    }
}

/// A [`OneOf`]'s text, decoded as an enum whose variants are the allowed texts.
struct Choice<C>(String, PhantomData<C>);

impl<'de, C: Choices> Deserialize<'de> for Choice<C> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ChoiceVisitor<C>(PhantomData<C>);

        impl<'de, C: Choices> Visitor<'de> for ChoiceVisitor<C> {
            type Value = Choice<C>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "one of: {}", C::ALLOWED.join(", "))
            }

            fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Choice<C>, A::Error> {
                let (text, variant): (String, _) = data.variant()?;
                de::VariantAccess::unit_variant(variant)?;
                Ok(Choice(text, PhantomData))
            }
        }

        deserializer.deserialize_enum("", C::ALLOWED, ChoiceVisitor(PhantomData))
    }
}

/// What a [`Ref`] may refer to.
pub(super) trait Target {
    /// What the messages call it and an example reference: `["a network", "network.main"]`.
    const WHAT_AND_EXAMPLE: &'static [&'static str];

    /// Whether a block part's address is one of these.
    fn accepts(address: &str) -> bool;
}

/// A reference to another block's part (`network.main`, `storage_account.data.container.raw`):
/// written without quotes, it evaluates to the object that block exposes, whose `address` must
/// be one `T` accepts. Holds the address.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Ref<T> {
    /// The referenced address.
    pub address: String,
    target: PhantomData<T>,
}

impl<'de, T: Target> Deserialize<'de> for Ref<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RefVisitor<T>(PhantomData<T>);

        impl<T: Target> Visitor<'_> for RefVisitor<T> {
            type Value = Ref<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    T::WHAT_AND_EXAMPLE
                        .first()
                        .copied()
                        .unwrap_or("a reference"),
                )
            }

            fn visit_str<E: de::Error>(self, address: &str) -> Result<Ref<T>, E> {
                if T::accepts(address) {
                    Ok(Ref {
                        address: address.to_owned(),
                        target: PhantomData,
                    })
                } else {
                    Err(E::custom(address))
                }
            }
        }

        deserializer.deserialize_struct(REF, T::WHAT_AND_EXAMPLE, RefVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests;

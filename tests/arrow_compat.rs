//! Nested arrays are fitted to a table's type by field id, never by name or position.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int32Array, Int64Array, ListArray, StringArray, StructArray,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field, Fields, Int64Type};
use floe::arrow_compat::conform_by_field_id;

fn field(name: &str, data_type: DataType, id: i32) -> Field {
    Field::new(name, data_type, true).with_metadata(HashMap::from([(
        "PARQUET:field_id".to_string(),
        id.to_string(),
    )]))
}

#[test]
fn struct_fields_match_by_id_and_missing_ones_are_null() {
    // The file wrote {a: 3 -> [1, 2], b: 4 -> ["x", "y"]}; the table has since swapped the
    // names, widened field 3 and added field 5.
    let file = StructArray::new(
        Fields::from(vec![
            field("a", DataType::Int32, 3),
            field("b", DataType::Utf8, 4),
        ]),
        vec![
            Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef,
            Arc::new(StringArray::from(vec!["x", "y"])),
        ],
        None,
    );
    let table = DataType::Struct(Fields::from(vec![
        field("a", DataType::Utf8, 4),
        field("b", DataType::Int64, 3),
        field("c", DataType::Utf8, 5),
    ]));
    let fitted = conform_by_field_id(&(Arc::new(file) as ArrayRef), &table).expect("fits");
    let fitted = fitted.as_struct();
    assert_eq!(fitted.data_type(), &table);
    assert_eq!(
        fitted
            .column(0)
            .as_string::<i32>()
            .iter()
            .collect::<Vec<_>>(),
        vec![Some("x"), Some("y")]
    );
    assert_eq!(
        fitted.column(1).as_primitive::<Int64Type>(),
        &Int64Array::from(vec![1, 2])
    );
    assert_eq!(fitted.column(2).null_count(), 2);
}

#[test]
fn list_elements_are_fitted_and_all_null_columns_take_any_type() {
    let element = Fields::from(vec![field("a", DataType::Int32, 3)]);
    let values = StructArray::new(
        element.clone(),
        vec![Arc::new(Int32Array::from(vec![7, 8, 9])) as ArrayRef],
        None,
    );
    let list = ListArray::new(
        Arc::new(field("element", DataType::Struct(element), 2)),
        OffsetBuffer::from_lengths([2, 1]),
        Arc::new(values),
        None,
    );
    let table_element = DataType::Struct(Fields::from(vec![
        field("z", DataType::Utf8, 6),
        field("a", DataType::Int32, 3),
    ]));
    let table = DataType::List(Arc::new(field("element", table_element, 2)));
    let fitted = conform_by_field_id(&(Arc::new(list) as ArrayRef), &table).expect("fits");
    assert_eq!(fitted.data_type(), &table);
    let values = fitted.as_list::<i32>().values().as_struct().clone();
    assert_eq!(values.column(0).null_count(), 3);
    assert_eq!(values.column(1).len(), 3);

    // A column the file lacked arrives as NULLs of a stand-in type.
    let stand_in: ArrayRef = Arc::new(datafusion::arrow::array::BooleanArray::new_null(2));
    let fitted = conform_by_field_id(&stand_in, &table).expect("fits");
    assert_eq!(fitted.data_type(), &table);
    assert_eq!(fitted.null_count(), 2);
}
